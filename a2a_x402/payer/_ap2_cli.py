"""``x402-pay``'s AP2 options: the user's open mandates and the agent key they confirm, read from files,
checked, and redacted from every log line before anything is sent.

    x402-pay --card-url URL --tenant acme --ap2-mandates DIR --ap2-agent-key FILE "some text"

``DIR`` holds the open checkout and payment mandates as issued (``checkout.sdjwt``, ``payment.sdjwt``:
one SD-JWT each); ``FILE`` the agent's private key as a JWK (EC P-256). ``--ap2-usage-file`` names a
SQLite file counting what was presented under the open payment mandate, shared by every run naming it;
without it the count is this run's alone. ``--ap2-fallback`` lets a payment whose mandates a merchant
does not support (``mandates_not_supported``) go without them. Nothing of a mandate or of the key is ever
printed: a mistake in them is one line naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from a2a_x402 import cli
from a2a_x402.observability import redact_values

if TYPE_CHECKING:
    from ._ap2_sdk import OpenMandates

__all__ = ["CHECKOUT_FILE", "PAYMENT_FILE", "ap2_options", "read_open_mandates"]

CHECKOUT_FILE = "checkout.sdjwt"
"""The open checkout mandate's file in ``--ap2-mandates``."""
PAYMENT_FILE = "payment.sdjwt"
"""The open payment mandate's file in ``--ap2-mandates``."""
_MAX_TOKEN_BYTES = 32_768

F = TypeVar("F", bound=Callable[..., Any])


def ap2_options(command: F) -> F:
    """Add the AP2 options to ``command``."""
    options = [
        click.option(
            "--ap2-mandates",
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            default=None,
            help=f"A folder with the user's open AP2 mandates ({CHECKOUT_FILE}, {PAYMENT_FILE}).",
        ),
        click.option(
            "--ap2-agent-key",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="The agent's private key (EC P-256 JWK) the open mandates confirm.",
        ),
        click.option(
            "--ap2-usage-file",
            envvar="X402_PAYER_AP2_USAGE_FILE",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="A SQLite file (made if missing) counting the open mandate's budget across runs.",
        ),
        click.option(
            "--ap2-fallback",
            is_flag=True,
            help="Pay without the mandates when the merchant answers mandates_not_supported.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def read_open_mandates(
    folder: Path | None, agent_key: Path | None, usage_file: Path | None
) -> OpenMandates | None:
    """The open mandates the options name, registered with the log redaction; ``None`` without them.

    Raises:
        click.UsageError: one of the two options without the other, a missing or malformed file.
        cli.ConfigError: ``usage_file`` cannot be opened or made.
    """
    if folder is None and agent_key is None:
        if usage_file is not None:
            raise click.UsageError("--ap2-usage-file needs --ap2-mandates and --ap2-agent-key")
        return None
    if folder is None or agent_key is None:
        raise click.UsageError("give --ap2-mandates and --ap2-agent-key together")
    checkout = _token(folder / CHECKOUT_FILE)
    payment = _token(folder / PAYMENT_FILE)
    key = _agent_key(agent_key)
    redact_values([key["d"], *_pieces(checkout), *_pieces(payment)])
    from ._ap2_sdk import OpenMandates
    from ._ap2_usage import MandateUsageFile, MandateUsageMemory

    try:
        usage = MandateUsageFile(usage_file) if usage_file is not None else MandateUsageMemory()
    except ValueError as exc:
        raise cli.ConfigError(str(exc)) from exc
    return OpenMandates(checkout=checkout, payment=payment, agent_key=key, usage=usage)


def _token(path: Path) -> str:
    try:
        data = path.read_bytes()[: _MAX_TOKEN_BYTES + 1]
    except OSError as exc:
        raise click.UsageError(f"{path}: cannot be read ({exc.strerror})") from None
    text = data.decode("ascii", errors="replace").strip()
    if len(data) > _MAX_TOKEN_BYTES or not text.isascii() or text.count(".") < 2 or not text.endswith("~"):
        raise click.UsageError(f"{path} is not an open mandate as issued (one SD-JWT ending in ~)")
    return text


def _agent_key(path: Path) -> dict[str, str]:
    try:
        key = json.loads(path.read_bytes()[:_MAX_TOKEN_BYTES])
    except (OSError, ValueError):
        key = None
    members = ("kty", "crv", "x", "y", "d")
    if (
        not isinstance(key, dict)
        or (key.get("kty"), key.get("crv")) != ("EC", "P-256")
        or not all(isinstance(key.get(name), str) for name in members)
    ):
        raise click.UsageError(f"{path} is not an EC P-256 private key as a JWK (kty, crv, x, y, d)")
    return {name: value for name, value in key.items() if isinstance(value, str)}


def _pieces(token: str) -> list[str]:
    """Each disclosure and each part of the issuer-signed JWT of ``token``: what a log line could quote."""
    parts = [part for part in token.split("~") if part]
    return [token, *parts, *(segment for part in parts[:1] for segment in part.split("."))]
