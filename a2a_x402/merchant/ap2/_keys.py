"""A tenant's checkout keys (§20.1): loaded from PEM files, published as a JWK Set, signing compact JWTs.

A tenant names its checkout keys as PEM files, newest first: the first signs every checkout JWT and AP2
receipt, and all of them are published, so that a retired key still verifies what it signed until that
has expired or been settled. Every key must be an EC P-256 private key: ES256 signatures are not
deterministic, as AP2 asks of the checkout JWT. A key's ``kid`` is its RFC 7638 thumbprint, so it is the
same whichever file or format it was read from, and rotating keys needs no naming scheme.

Loading a key registers its private material with the log redaction, in every form it could be written
in (the JWK ``d``, its hex, the PEM lines of PKCS#8 and SEC 1), before anything else is done with it.
No error of this module quotes the file's content.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import ECKey

from a2a_x402.agentcard import SigningKey
from a2a_x402.observability import redact_values

__all__ = [
    "CHECKOUT_JWT_TYPE",
    "CheckoutKeyError",
    "CheckoutKeys",
    "CheckoutTokenError",
    "load_checkout_keys",
]

logger = logging.getLogger(__name__)

CHECKOUT_JWT_TYPE = "JWT"
"""The ``typ`` of the checkout JWT and the receipts (§20.3, §20.6: JWTs, as AP2's own are)."""
_ALG = "ES256"
_KEY_FILE_MAX_BYTES = 64 * 1024
_MAX_TOKEN_CHARS = 64 * 1024
# PEM lines and base64 runs shorter than this are too common to redact without redacting ordinary text.
_MIN_PIECE = 16
_B64URL = re.compile(r"[A-Za-z0-9_-]+")


class CheckoutKeyError(ValueError):
    """A checkout key that cannot be used: missing, unreadable, not a key, not EC P-256, given twice.

    The message is one line naming the file, never its content.
    """


class CheckoutTokenError(ValueError):
    """A token that is not a JWT these checkout keys signed: malformed, another key, a changed byte."""


@dataclass(frozen=True, slots=True)
class CheckoutKeys:
    """A tenant's checkout keys: the first signs, all are published (``public_jwks``).

    Build it with ``load_checkout_keys``, or from keys already held (each an ES256 ``SigningKey``).

    Raises:
        CheckoutKeyError: no key, a key that is not ES256, or one key twice.
    """

    keys: tuple[SigningKey, ...] = field(repr=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise CheckoutKeyError("a tenant in the embedded flow needs at least one checkout key")
        seen: set[str] = set()
        for key in self.keys:
            if key.alg != _ALG:
                raise CheckoutKeyError(f"checkout key {key.kid} is {key.alg}; checkout keys are ES256")
            if key.kid in seen:
                raise CheckoutKeyError(f"checkout key {key.kid} is given twice")
            seen.add(key.kid)

    @property
    def signing_kid(self) -> str:
        """The ``kid`` of the key that signs now (the first)."""
        return self.keys[0].kid

    @property
    def kids(self) -> tuple[str, ...]:
        """Every published ``kid``, the signing one first."""
        return tuple(key.kid for key in self.keys)

    def public_jwks(self) -> dict[str, list[dict[str, Any]]]:
        """The JWK Set the tenant's ``jwksUrl`` serves: each key's public part, ``kid``, ``alg``, ``use``."""
        return {"keys": [key.public_jwk() for key in self.keys]}

    def sign(self, claims: Mapping[str, Any]) -> str:
        """``claims`` as a compact JWS of the current key: header ``alg`` ES256, ``typ`` JWT and its ``kid``.

        Raises:
            ValueError: ``claims`` hold something JSON cannot carry (NaN, a non-string member name).
        """
        key = self.keys[0]
        payload = json.dumps(claims, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        header = {"alg": _ALG, "typ": CHECKOUT_JWT_TYPE, "kid": key.kid}
        return jws.serialize_compact(header, payload.encode("utf-8"), key.key, algorithms=[_ALG])

    def verify(self, token: str) -> dict[str, Any]:
        """The claims of a JWT one of these keys signed (a stored checkout, a receipt in a dispute).

        Raises:
            CheckoutTokenError: not a compact JWS of ES256 with a ``kid`` of these keys, a signature that
                does not match, or a payload that is not a JSON object. The token is never quoted.
        """
        if not isinstance(token, str) or len(token) > _MAX_TOKEN_CHARS or token.count(".") != 2:
            raise CheckoutTokenError("not a compact JWS")
        try:
            header = json.loads(b64url_decode(token.split(".", 1)[0]))
        except (ValueError, RecursionError):
            raise CheckoutTokenError("the JWS header is not base64url JSON") from None
        if not isinstance(header, dict) or header.get("alg") != _ALG:
            raise CheckoutTokenError("the JWS is not ES256")
        if header.get("typ") != CHECKOUT_JWT_TYPE:
            raise CheckoutTokenError(f"the JWS header's typ is not {CHECKOUT_JWT_TYPE}")
        kid = header.get("kid")
        key = next((key for key in self.keys if key.kid == kid), None)
        if key is None:
            raise CheckoutTokenError(f"no checkout key has the kid {str(kid)[:64]!r}")
        public = ECKey.import_key(key.key.as_dict(private=False))
        try:
            signed = jws.deserialize_compact(token, public, algorithms=[_ALG])
        except (JoseError, ValueError):
            raise CheckoutTokenError(f"the signature does not verify with checkout key {key.kid}") from None
        try:
            claims = json.loads(signed.payload)
        except (ValueError, RecursionError):
            raise CheckoutTokenError("the JWS payload is not JSON") from None
        if not isinstance(claims, dict):
            raise CheckoutTokenError("the JWS payload is not a JSON object")
        return claims


def load_checkout_keys(paths: Sequence[str | os.PathLike[str]], *, tenant: str = "") -> CheckoutKeys:
    """Read a tenant's checkout keys, the signing one first, each an unencrypted PEM EC P-256 private key
    (PKCS#8 or SEC 1, an ``EC PARAMETERS`` block beside it allowed). Each key's private material is
    registered with the log redaction as soon as it is read.

    Raises:
        CheckoutKeyError: no path, a file missing or unreadable, one that holds no such key (another
            curve or algorithm, an encrypted key, not a key at all), or the same key twice.
    """
    if not paths:
        raise CheckoutKeyError("a tenant in the embedded flow needs at least one checkout key file")
    keys = CheckoutKeys(tuple(_load_one(path) for path in paths))
    logger.info(
        "AP2 checkout keys of tenant %s: %s (signing: %s)",
        tenant or "(default)",
        ", ".join(keys.kids),
        keys.signing_kid,
    )
    return keys


def _load_one(path: str | os.PathLike[str]) -> SigningKey:
    where = os.fspath(path)
    try:
        with Path(path).open("rb") as file:
            data = file.read(_KEY_FILE_MAX_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CheckoutKeyError(f"checkout key file {where}: cannot be read ({reason})") from None
    if len(data) > _KEY_FILE_MAX_BYTES:
        raise CheckoutKeyError(f"checkout key file {where}: larger than {_KEY_FILE_MAX_BYTES} bytes")
    if b"-----BEGIN" not in data:
        raise CheckoutKeyError(f"checkout key file {where}: not a PEM file")
    # Whatever a PEM file holds may be a secret, however it is wrapped: redacted before it is parsed.
    redact_values(_pieces(data.decode("ascii", errors="replace").splitlines()))
    try:
        loaded = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        # `cryptography` says so for an encrypted key read without a password.
        raise CheckoutKeyError(
            f"checkout key file {where}: the key is encrypted; checkout keys are read without a passphrase"
        ) from None
    except ValueError:
        raise CheckoutKeyError(f"checkout key file {where}: holds no PEM private key") from None
    if not isinstance(loaded, ec.EllipticCurvePrivateKey) or not isinstance(loaded.curve, ec.SECP256R1):
        raise CheckoutKeyError(
            f"checkout key file {where}: the key is {_describe(loaded)}; checkout keys are EC P-256 (ES256)"
        )
    key = ECKey.import_key(_pem(loaded, serialization.PrivateFormat.PKCS8))
    _register(loaded, str(key.as_dict(private=True)["d"]))
    return SigningKey(kid=key.thumbprint(), alg=_ALG, key=key)


def _register(key: ec.EllipticCurvePrivateKey, jwk_d: str) -> None:
    """Redact every form of ``key``'s private part a log line could carry: the JWK ``d``, the scalar in hex
    and in decimal, and the PEM lines of both formats a key file has."""
    scalar = key.private_numbers().private_value
    forms = [jwk_d, f"{scalar:064x}", str(scalar)]
    for private_format in (serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL):
        forms += _pieces(_pem(key, private_format).decode("ascii").splitlines())
    redact_values(forms)


def _pem(key: ec.EllipticCurvePrivateKey, private_format: serialization.PrivateFormat) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption())


def _pieces(lines: Iterable[str]) -> list[str]:
    """The lines of a PEM body long enough to be told from ordinary text (no ``-----`` armour lines)."""
    return [line.strip() for line in lines if len(line.strip()) >= _MIN_PIECE and "-----" not in line]


def _describe(key: object) -> str:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return f"EC {key.curve.name}"
    return type(key).__name__.removeprefix("_").removesuffix("PrivateKey") or "non-EC"


def b64url_decode(text: str) -> bytes:
    """The bytes of unpadded base64url ``text`` (the segments of a JWS), for this package's modules.

    Raises:
        ValueError: ``text`` is not base64url.
    """
    if not _B64URL.fullmatch(text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
