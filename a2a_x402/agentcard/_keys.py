"""Signing keys and verification keys: generating, loading and checking them (the directory: `_keystore`).

Usage (merchant side)::

    store = KeyStore("/var/lib/merchant/keys")
    store.generate("ES256")                  # first key            (x402-merchant keys generate)
    store.rotate()                           # new key, old one still signs (x402-merchant keys rotate)
    store.retire(old_kid)                    # stops signing and leaves the JWKS (x402-merchant keys retire)
    signed = sign_card(card_json, store.signing_keys(), jku=jwks_url("https://shop.example"))
    jwks = store.public_jwks()               # serve at /.well-known/jwks.json

    keys = load_signing_keys_from_env()      # or one PEM / JWK file: load_signing_key(path)

Usage (payer side): ``parse_jwks(json)`` turns a JWK Set you trust into ``VerificationKey`` objects for
``CardVerifier(trusted_keys=...)``.

Kids are RFC 7638 thumbprints unless a JWK brings its own, so the same key always gets the same kid.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from joserfc import jwk
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey, RSAKey

from ._errors import KeyLoadError, KeyMismatchError
from ._parse import load_json_object

__all__ = [
    "DEFAULT_KEYS_ENV",
    "SIGNING_ALGORITHMS",
    "VERIFICATION_ALGORITHMS",
    "SigningKey",
    "VerificationKey",
    "generate_signing_key",
    "load_signing_key",
    "load_signing_keys_from_env",
    "parse_jwks",
]

logger = logging.getLogger(__name__)

SIGNING_ALGORITHMS: tuple[str, ...] = ("ES256", "EdDSA")
"""Algorithms this package signs with. ES256 is the default: every JOSE library verifies it."""

# alg -> (kty, crv); RSA has no curve and a minimum size instead.
_ALGORITHM_KEYS: dict[str, tuple[str, str | None]] = {
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "EdDSA": ("OKP", "Ed25519"),
    "Ed25519": ("OKP", "Ed25519"),
    "PS256": ("RSA", None),
    "RS256": ("RSA", None),
}
VERIFICATION_ALGORITHMS: tuple[str, ...] = tuple(sorted(_ALGORITHM_KEYS))
"""Asymmetric algorithms accepted on a counterpart's card. ``none`` and HMAC are never accepted: a verifier
that only has public keys must not let a header turn a public key into a shared secret."""

_MIN_RSA_BITS = 2048
DEFAULT_KEYS_ENV = "AGENTCARD_SIGNING_KEYS"
_KEY_FILE_MAX_BYTES = 64 * 1024
_MAX_KID_LENGTH = 256
_PEM_BLOCK_RE = re.compile(rb"-----BEGIN ([A-Z ]+)-----.+?-----END \1-----", re.DOTALL)

SupportedKey = ECKey | OKPKey | RSAKey


def check_key_fits(key: SupportedKey, alg: str) -> None:
    """Raise ``KeyMismatchError`` unless ``key`` has the type (and curve or size) that ``alg`` needs."""
    if alg not in _ALGORITHM_KEYS:
        raise KeyMismatchError(f"algorithm {alg!r} is not supported")
    kty, crv = _ALGORITHM_KEYS[alg]
    if key.key_type != kty:
        raise KeyMismatchError(f"{alg} needs a {kty} key, got {key.key_type}")
    if isinstance(key, RSAKey):
        if key.public_key.key_size < _MIN_RSA_BITS:
            raise KeyMismatchError(f"RSA key of {key.public_key.key_size} bits is below {_MIN_RSA_BITS}")
    elif key.curve_name != crv:
        raise KeyMismatchError(f"{alg} needs curve {crv}, got {key.curve_name}")


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private key that signs Agent Cards.

    Attributes:
        kid: Key id put in the protected header and the JWKS.
        alg: ``ES256`` or ``EdDSA``.
        key: The joserfc private key.
    """

    kid: str
    alg: str
    key: ECKey | OKPKey

    def __post_init__(self) -> None:
        if self.alg not in SIGNING_ALGORITHMS:
            raise KeyLoadError(f"cannot sign with {self.alg!r}; use one of {', '.join(SIGNING_ALGORITHMS)}")
        if not self.key.is_private:
            raise KeyLoadError(f"key {self.kid!r} is a public key; signing needs the private key")
        try:
            check_key_fits(self.key, self.alg)
        except KeyMismatchError as exc:
            raise KeyLoadError(str(exc)) from exc
        if not self.kid or len(self.kid) > _MAX_KID_LENGTH:
            raise KeyLoadError(f"kid must be 1 to {_MAX_KID_LENGTH} characters")

    def public_jwk(self) -> dict[str, Any]:
        """The public JWK to publish: key members plus ``kid``, ``alg`` and ``use: sig``."""
        public = {
            name: value for name, value in self.key.as_dict(private=False).items() if name in _KEY_MEMBERS
        }
        return {**public, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def private_jwk(self) -> dict[str, Any]:
        """The private JWK (secret!) with ``kid`` and ``alg``, as written to the key directory."""
        private = {
            name: value for name, value in self.key.as_dict(private=True).items() if name in _KEY_MEMBERS
        }
        return {**private, "kid": self.kid, "alg": self.alg}


# Members that describe the key itself; everything else (kid, alg, use, exp...) is set by us.
_KEY_MEMBERS = frozenset({"kty", "crv", "x", "y", "d", "n", "e", "p", "q", "dp", "dq", "qi"})


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """A public key that may verify a counterpart's card signature.

    Attributes:
        kid: Key id the protected header must name.
        key: The joserfc public key.
        thumbprint: RFC 7638 thumbprint, matched against revocation sets alongside the kid.
        alg: The JWK ``alg`` member, if any; a signature must then use exactly that algorithm.
        use: The JWK ``use`` member, if any; anything but ``sig`` makes the key unusable here.
        key_ops: The JWK ``key_ops`` member, if any; it must then include ``verify``.
        not_before: JWK ``nbf`` (UTC), if present.
        expires_at: JWK ``exp`` (UTC), if present.
    """

    kid: str
    key: SupportedKey
    thumbprint: str
    alg: str | None = None
    use: str | None = None
    key_ops: tuple[str, ...] | None = None
    not_before: datetime | None = None
    expires_at: datetime | None = None

    @classmethod
    def from_jwk(cls, data: Mapping[str, Any]) -> VerificationKey:
        """Build a verification key from a JWK (private members, if any, are dropped).

        Raises:
            KeyLoadError: not an EC, OKP or RSA key, malformed members, or non-numeric ``exp``/``nbf``.
        """
        key = _import_jwk(data, private=False)
        kid = data.get("kid", key.thumbprint())
        if not isinstance(kid, str) or not kid:
            raise KeyLoadError("JWK kid must be a non-empty string")
        key_ops = data.get("key_ops")
        if key_ops is not None and not (
            isinstance(key_ops, list) and all(isinstance(op, str) for op in key_ops)
        ):
            raise KeyLoadError(f"JWK {kid!r}: key_ops must be an array of strings")
        return cls(
            kid=kid,
            key=key,
            thumbprint=key.thumbprint(),
            alg=_optional_str(data, "alg", kid),
            use=_optional_str(data, "use", kid),
            key_ops=tuple(key_ops) if key_ops is not None else None,
            not_before=_optional_time(data, "nbf", kid),
            expires_at=_optional_time(data, "exp", kid),
        )


def parse_jwks(jwks: Mapping[str, Any]) -> dict[str, VerificationKey]:
    """Index the keys of a JWK Set by kid.

    Entries that are not usable public keys of a supported type (symmetric keys, unknown curves, broken
    members) are skipped with a warning, as RFC 7517 §5 asks, so one odd key does not hide the others.

    Raises:
        KeyLoadError: ``jwks`` is not ``{"keys": [...]}``, or two entries share a kid.
    """
    entries = jwks.get("keys")
    if not isinstance(entries, list):
        raise KeyLoadError('a JWK Set must be an object with a "keys" array')
    keys: dict[str, VerificationKey] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            logger.warning("JWK Set entry %d skipped: not an object", index)
            continue
        try:
            key = VerificationKey.from_jwk(entry)
        except KeyLoadError as exc:
            logger.warning("JWK Set entry %d skipped: %s", index, exc)
            continue
        if key.kid in keys:
            raise KeyLoadError(f"JWK Set has two keys with kid {key.kid!r}")
        keys[key.kid] = key
    return keys


def generate_signing_key(alg: str = "ES256") -> SigningKey:
    """Generate a new private key for ``alg`` (``ES256`` or ``EdDSA``); its kid is its RFC 7638 thumbprint.

    Raises:
        KeyLoadError: ``alg`` is not one we sign with.
    """
    key: ECKey | OKPKey
    if alg == "ES256":
        key = ECKey.generate_key("P-256")
    elif alg == "EdDSA":
        key = OKPKey.generate_key("Ed25519")
    else:
        raise KeyLoadError(f"cannot generate a key for {alg!r}; use one of {', '.join(SIGNING_ALGORITHMS)}")
    return SigningKey(kid=key.thumbprint(), alg=alg, key=key)


def load_signing_key(path: str | os.PathLike[str]) -> SigningKey:
    """Load exactly one private signing key from a PEM (PKCS#8 or SEC 1) or JWK file.

    Raises:
        KeyLoadError: the file is missing, unreadable, holds no key, several keys, or an unsupported key.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise KeyLoadError(f"cannot read key file {os.fspath(path)!r}: {exc.strerror}") from exc
    keys = _signing_keys_from_bytes(data, source=os.fspath(path))
    if len(keys) != 1:
        raise KeyLoadError(f"{os.fspath(path)!r} holds {len(keys)} keys; expected exactly one")
    return keys[0]


def load_signing_keys_from_env(
    name: str = DEFAULT_KEYS_ENV, *, environ: Mapping[str, str] | None = None
) -> list[SigningKey]:
    """Load signing keys from an environment variable, in the order given (the first signs first).

    The value is one or more PEM private keys, one private JWK, or a JWK Set of private keys.

    Raises:
        KeyLoadError: the variable is unset or empty, or holds no usable key.
    """
    env = os.environ if environ is None else environ
    value = env.get(name, "").strip()
    if not value:
        raise KeyLoadError(f"environment variable {name} is not set")
    return _signing_keys_from_bytes(value.encode("utf-8"), source=f"${name}")


def _signing_keys_from_bytes(data: bytes, *, source: str) -> list[SigningKey]:
    if len(data) > _KEY_FILE_MAX_BYTES:
        raise KeyLoadError(f"{source} is larger than {_KEY_FILE_MAX_BYTES} bytes")
    stripped = data.strip()
    if stripped.startswith(b"-----BEGIN"):
        keys = [_signing_key_from_pem(block.group(0), source) for block in _PEM_BLOCK_RE.finditer(stripped)]
        if not keys:
            raise KeyLoadError(f"{source}: no complete PEM block")
        return keys
    try:
        obj = load_json_object(stripped, max_bytes=_KEY_FILE_MAX_BYTES, what=source)
    except ValueError as exc:
        raise KeyLoadError(f"{source} is neither PEM nor a JWK: {exc}") from exc
    entries = obj.get("keys") if "keys" in obj else [obj]
    if not isinstance(entries, list) or not entries:
        raise KeyLoadError(f'{source}: "keys" must be a non-empty array')
    return [signing_key_from_jwk(entry, source) for entry in entries]


def _signing_key_from_pem(block: bytes, source: str) -> SigningKey:
    try:
        loaded = serialization.load_pem_private_key(block, password=None)
    except (ValueError, TypeError) as exc:
        # TypeError is how `cryptography` reports an encrypted PEM given without a password.
        raise KeyLoadError(f"{source}: not an unencrypted PEM private key ({exc})") from exc
    key: ECKey | OKPKey
    if isinstance(loaded, ec.EllipticCurvePrivateKey) and isinstance(loaded.curve, ec.SECP256R1):
        key, alg = ECKey.import_key(block), "ES256"
    elif isinstance(loaded, ed25519.Ed25519PrivateKey):
        key, alg = OKPKey.import_key(block), "EdDSA"
    else:
        raise KeyLoadError(f"{source}: only P-256 (ES256) and Ed25519 (EdDSA) private keys can sign")
    return SigningKey(kid=key.thumbprint(), alg=alg, key=key)


def signing_key_from_jwk(data: Any, source: str) -> SigningKey:
    if not isinstance(data, Mapping):
        raise KeyLoadError(f"{source}: a JWK must be an object")
    key = _import_jwk(data, private=True)
    if isinstance(key, RSAKey):
        raise KeyLoadError(f"{source}: only P-256 (ES256) and Ed25519 (EdDSA) private keys can sign")
    default_alg = "ES256" if isinstance(key, ECKey) else "EdDSA"
    alg = _optional_str(data, "alg", source) or default_alg
    kid = _optional_str(data, "kid", source) or key.thumbprint()
    return SigningKey(kid=kid, alg=alg, key=key)


def _import_jwk(data: Mapping[str, Any], *, private: bool) -> SupportedKey:
    kty = data.get("kty")
    if kty not in ("EC", "OKP", "RSA"):
        raise KeyLoadError(f"JWK kty {kty!r} is not supported (EC, OKP or RSA only)")
    members = {name: value for name, value in data.items() if name in _KEY_MEMBERS}
    try:
        key = jwk.import_key(members)
        if not private:
            key = jwk.import_key(key.as_dict(private=False))
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise KeyLoadError(f"invalid {kty} JWK: {exc}") from exc
    if not isinstance(key, ECKey | OKPKey | RSAKey):
        raise KeyLoadError(f"JWK kty {kty!r} is not supported")
    if private and not key.is_private:
        raise KeyLoadError("JWK is a public key; signing needs the private key")
    return key


def _optional_str(data: Mapping[str, Any], name: str, context: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise KeyLoadError(f"JWK {context!r}: {name} must be a string")
    return value


def _optional_time(data: Mapping[str, Any], name: str, kid: str) -> datetime | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KeyLoadError(f"JWK {kid!r}: {name} must be a number of seconds since the epoch")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise KeyLoadError(f"JWK {kid!r}: {name} {value} is out of range") from exc
