"""Redaction of log lines: no secret and no payment signature is written, whatever logged it.

Two nets. Values: the secrets a service was configured with (API tokens, webhook secrets, relayer and card
keys, database passwords) are registered with `redact_values` at start-up, and every occurrence of one
in a line is replaced. Shapes: what looks like a secret whoever logs it: webhook secrets (`whsec_…`),
bearer credentials, the value after a secret-sounding name (`token=`, `"secret": …`, `password:` …), a
URL's password, and any `0x` hex string of 130 digits or more (a 65-byte ECDSA signature, or longer: an
ERC-6492-wrapped one, calldata carrying one). 32-byte hex strings (transaction hashes, nonces) stay: they
are public and what an operator follows a payment by; keys are never logged by the services, and the
dependencies that would write SQL parameters or request bodies are kept above DEBUG (`_logs`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

__all__ = ["REDACTED", "redact", "redact_values", "settings_secrets"]

REDACTED = "[redacted]"
_MIN_VALUE_LENGTH = 8  # shorter values would redact ordinary words; no secret of ours is that short

# In this order: a named value first (with its scheme, `Authorization: Bearer …`), then the shapes that
# need no name; each replacement is left alone by the later shapes.
_NAMES = r"token|secret|password|passwd|private_key|relayer_key|signing_keys?|api_key|authorization|cookie"
_SHAPES = (
    (
        re.compile(
            rf"(?i)\b([a-z0-9_]*(?:{_NAMES})['\"]?\s*[:=]\s*(?:[a-z]+\()?['\"]?)"
            r"(?:(?:bearer|basic)\s+)?(?!\[redacted\])[^\s'\",;&)}\]]+"
        ),
        r"\1" + REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+(?!\[redacted\])[A-Za-z0-9._~+/=-]+"), r"\1 " + REDACTED),
    (re.compile(r"whsec_[A-Za-z0-9+/=_-]+"), "whsec_" + REDACTED),
    (re.compile(r"0x[0-9a-fA-F]{130,}"), "0x" + REDACTED),
    (re.compile(r"(?i)(://[^/\s:@]*:)[^/\s@]+@"), r"\1" + REDACTED + "@"),
)

_lock = threading.Lock()
_values: set[str] = set()
_pattern: re.Pattern[str] | None = None


def redact_values(values: Iterable[str | None]) -> None:
    """Replace every later occurrence of each of `values` (those of 8 characters or more) in log lines.

    A value with a `0x` prefix is registered with and without it. Registrations add up for the process.
    """
    global _pattern  # noqa: PLW0603 - one table for the process, as logging's own configuration is
    with _lock:
        for value in values:
            if value is None:
                continue
            for form in {value.strip(), value.strip().removeprefix("0x")}:
                if len(form) >= _MIN_VALUE_LENGTH:
                    _values.add(form)
        # Longest first: a value that contains another is replaced whole.
        ordered = sorted(_values, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(value) for value in ordered)) if ordered else None


# A secret setting may hold several keys (a list, a JWK Set, PEM lines): each long enough piece counts too.
_PIECES = re.compile(r"[^\s,;:'\"{}\[\]]{16,}")


def settings_secrets(settings: BaseModel) -> list[str]:
    """The secrets in `settings`: every `SecretStr` field's value and its long pieces, and the password of
    every URL field (`*_url`)."""
    found: list[str] = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            secret = value.get_secret_value()
            found += [secret, *_PIECES.findall(secret)]
        elif isinstance(value, str) and name.endswith("_url"):
            try:
                password = urlsplit(value).password
            except ValueError:
                continue
            if password:
                found.append(password)
    return found


def redact(text: str) -> str:
    """`text` with every registered value and every secret-shaped piece replaced by `[redacted]`."""
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    for shape, replacement in _SHAPES:
        text = shape.sub(replacement, text)
    return text
