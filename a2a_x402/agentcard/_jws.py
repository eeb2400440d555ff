"""JWS signatures with a detached payload over the canonical card bytes (A2A §8.4.2).

Usage::

    served = sign_card(card_json, store.signing_keys(), jku="https://shop.example/.well-known/jwks.json")

Each ``AgentCardSignature`` is ``{"protected": <b64url header>, "signature": <b64url signature>}`` (no
padding); the payload is the canonical card (``canonicalize_card``), which is not repeated in the signature.
The protected header is ``{"alg", "typ": "JOSE", "kid", "jku"?}``, plus ``cardReading`` on a signature over an
SDK's reading of the card rather than ours (``_readings``). ``sign_card`` adds one signature per key for each
distinct reading, so during a rotation the card carries a signature from the old key and one from the new.

On the verifying side the header is read strictly: base64url without padding, a JSON object without
duplicate members (two ``alg`` members would let two parsers disagree), ``alg`` from an asymmetric
allow-list, non-empty ``kid``, ``typ`` of ``JOSE``, no ``crit`` (no extension is understood), no unencoded
payload (``b64: false``), and an unprotected ``header`` that repeats none of the protected names.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from joserfc.errors import JoseError
from joserfc.jws import JWSRegistry

from ._canonical import canonicalize_card
from ._errors import (
    AlgorithmNotAllowedError,
    KeyMismatchError,
    SignatureMalformedError,
    SignatureMismatchError,
    SigningError,
)
from ._keys import VERIFICATION_ALGORITHMS, SigningKey, VerificationKey, check_key_fits
from ._parse import load_json_object
from ._readings import READING_HEADER, CardReading, read_card

__all__ = ["JOSE_TYPE", "sign_card"]

JOSE_TYPE = "JOSE"
_MAX_HEADER_BYTES = 4096
_MAX_SIGNATURE_CHARS = 2048
_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]*$")


@dataclass(frozen=True, slots=True)
class ProtectedHeader:
    """The JWS protected header of one card signature, as checked by the verifier."""

    alg: str
    kid: str
    typ: str
    jku: str | None
    reading: str | None = None
    """``READING_HEADER``: the reading signed when it is not ours (``None``)."""


def sign_card(
    card_json: Mapping[str, Any],
    keys: Sequence[SigningKey],
    *,
    jku: str | None = None,
    readings: Sequence[CardReading] = (CardReading.A2A,),
) -> dict[str, Any]:
    """Return the card to serve: ``card_json`` with ``signatures`` set, one per key and distinct reading.

    The first signatures (one per key) cover exactly ``card_json`` minus ``signatures`` (any given are
    replaced), canonicalized with ``canonicalize_card``. Serve the returned object as JSON; members the
    proto does not know (0.3 fields) are signed too, so serve them exactly as given. Each further reading
    in ``readings`` (``read_card``) whose bytes differ from those already signed adds one signature per key,
    its protected header naming the reading (``READING_HEADER``); a reading the card has none of is skipped.

    Args:
        card_json: The card's JSON object (e.g. ``MessageToDict(agent_card)`` plus any legacy members).
        keys: Signing keys, newest first (``KeyStore.signing_keys()``); at least one.
        jku: URL of the JWK Set holding the public keys, normally ``jwks_url(origin)``; put in every header.
        readings: The readings to sign; ours (``CardReading.A2A``) is always signed, first.

    Raises:
        SigningError: ``keys`` is empty.
        CanonicalizationError: the card has no canonical form.
    """
    if not keys:
        raise SigningError("no signing key given; generate one with KeyStore.generate()")
    payloads: dict[bytes, CardReading] = {canonicalize_card(card_json): CardReading.A2A}
    for reading in readings:
        payload = read_card(card_json, reading)
        if payload is not None and payload not in payloads:
            payloads[payload] = reading
    signed = {name: copy.deepcopy(value) for name, value in card_json.items() if name != "signatures"}
    signed["signatures"] = [
        sign_payload(payload, key, jku=jku, reading=reading)
        for payload, reading in payloads.items()
        for key in keys
    ]
    return signed


def sign_payload(
    payload: bytes, key: SigningKey, *, jku: str | None, reading: CardReading = CardReading.A2A
) -> dict[str, str]:
    """Sign ``payload`` (the card's ``reading``) detached with ``key``; returns the ``AgentCardSignature``."""
    header: dict[str, str] = {"alg": key.alg, "typ": JOSE_TYPE, "kid": key.kid}
    if jku is not None:
        header["jku"] = jku
    if reading is not CardReading.A2A:
        header[READING_HEADER] = reading.value
    protected = _b64encode(json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    signing_input = f"{protected}.{_b64encode(payload)}".encode("ascii")
    signature = JWSRegistry.algorithms[key.alg].sign(signing_input, key.key)
    return {"protected": protected, "signature": _b64encode(signature)}


def decode_signature(entry: Any, algorithms: Collection[str]) -> tuple[ProtectedHeader, str, str]:
    """Check one ``AgentCardSignature`` object and decode its protected header.

    Returns:
        The header, and the ``protected`` and ``signature`` members exactly as received.

    Raises:
        SignatureMalformedError: any member or header value is missing or malformed.
        AlgorithmNotAllowedError: ``alg`` is not in ``algorithms`` (which never holds ``none`` or HMAC).
    """
    if not isinstance(entry, Mapping):
        raise SignatureMalformedError("a signature must be a JSON object")
    protected, signature = entry.get("protected"), entry.get("signature")
    if not isinstance(protected, str) or not isinstance(signature, str):
        raise SignatureMalformedError('"protected" and "signature" must both be strings')
    try:
        header = load_json_object(_b64decode(protected), max_bytes=_MAX_HEADER_BYTES, what="protected header")
    except ValueError as exc:  # CardParseError and base64 errors are ValueErrors
        raise SignatureMalformedError(f'"protected" is not a base64url JSON object: {exc}') from exc
    alg = header.get("alg")
    if not isinstance(alg, str):
        raise SignatureMalformedError('protected header has no string "alg"')
    if alg not in algorithms:
        raise AlgorithmNotAllowedError(
            f"alg {alg!r} is not allowed; accepted: {', '.join(sorted(algorithms))}"
        )
    kid, typ, jku = header.get("kid"), header.get("typ"), header.get("jku")
    if not isinstance(kid, str) or not kid:
        raise SignatureMalformedError('protected header has no non-empty string "kid"')
    if not isinstance(typ, str) or typ.upper().removeprefix("APPLICATION/") != JOSE_TYPE:
        raise SignatureMalformedError(f'protected header "typ" must be {JOSE_TYPE!r}, got {typ!r}')
    if jku is not None and not isinstance(jku, str):
        raise SignatureMalformedError('protected header "jku" must be a string')
    reading = header.get(READING_HEADER)
    if reading is not None and (not isinstance(reading, str) or not reading):
        raise SignatureMalformedError(f'protected header "{READING_HEADER}" must be a non-empty string')
    if "crit" in header:
        raise SignatureMalformedError(
            'protected header "crit" names extensions this verifier does not support'
        )
    if header.get("b64", True) is not True:
        raise SignatureMalformedError("unencoded payloads (b64) are not used for agent cards")
    _check_unprotected(entry.get("header"), header)
    if not signature or len(signature) > _MAX_SIGNATURE_CHARS or not _B64URL_RE.match(signature):
        raise SignatureMalformedError('"signature" is not unpadded base64url')
    return ProtectedHeader(alg=alg, kid=kid, typ=typ, jku=jku, reading=reading), protected, signature


def verify_signature(payload: bytes, protected: str, signature: str, alg: str, key: VerificationKey) -> None:
    """Verify one detached signature over ``payload`` with ``key``.

    Raises:
        KeyMismatchError: the key's type, curve, JWK ``alg``, ``use`` or ``key_ops`` does not allow ``alg``.
        SignatureMismatchError: the signature does not match.
    """
    if alg not in VERIFICATION_ALGORITHMS:
        raise KeyMismatchError(f"algorithm {alg!r} is not supported")
    if key.alg is not None and key.alg != alg:
        raise KeyMismatchError(f"key {key.kid!r} is for {key.alg}, the signature says {alg}")
    if key.use is not None and key.use != "sig":
        raise KeyMismatchError(f"key {key.kid!r} has use {key.use!r}, not 'sig'")
    if key.key_ops is not None and "verify" not in key.key_ops:
        raise KeyMismatchError(f"key {key.kid!r} key_ops do not include 'verify'")
    check_key_fits(key.key, alg)
    signing_input = f"{protected}.{_b64encode(payload)}".encode("ascii")
    try:
        valid = JWSRegistry.algorithms[alg].verify(signing_input, _b64decode(signature), key.key)
    except (JoseError, ValueError, TypeError) as exc:
        raise SignatureMismatchError(f"signature could not be checked with key {key.kid!r}: {exc}") from exc
    if not valid:
        raise SignatureMismatchError(f"signature does not match the card for key {key.kid!r}")


def _check_unprotected(unprotected: Any, protected: Mapping[str, Any]) -> None:
    if unprotected is None:
        return
    if not isinstance(unprotected, Mapping):
        raise SignatureMalformedError('"header" must be a JSON object')
    shared = sorted(set(unprotected) & set(protected))
    if shared:
        # RFC 7515 §7.2.1: the two headers must be disjoint, or a reader could take the unsigned copy.
        raise SignatureMalformedError(f'"header" repeats protected member(s) {", ".join(shared)}')


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    """Strict unpadded base64url (RFC 7515 §2): other alphabets, padding and stray bits are refused."""
    if not _B64URL_RE.match(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    # Unused low bits in the last character give several spellings of one value; only one is accepted.
    if _b64encode(data) != text:
        raise ValueError("non-canonical base64url")
    return data
