"""The ``user_authorization`` of an AP2 v0.1 ``PaymentMandate`` (specification §20.7), verified.

AP2 v0.1 describes it as a verifiable presentation signing over the hashes of the ``CartMandate`` and of
the ``payment_mandate_contents``, for example an SD-JWT VC: an issuer-signed JWT confirming a holder key
(``cnf``) and a key-binding JWT with ``aud``, ``nonce``, ``sd_hash`` and ``transaction_data``, the two
hashes. §20.7 takes that example as the only form (the strict reading):

- the SD-JWT ``<issuer-signed JWT>~<disclosure>~...~<KB-JWT>`` (RFC 9901, compact);
- the issuer-signed JWT is ES256 under a key the tenant trusts as issuer (its ``kid`` in the tenant's
  issuer JWK Set, §20.1), has a ``cnf.jwk`` that is an EC P-256 public key, is not expired (``exp``) and
  not issued in the future (``iat``); each disclosure is one its ``_sd`` digests (SHA-256) name;
- the KB-JWT has ``typ`` ``kb+jwt``, is ES256 under the ``cnf`` key, its ``aud`` is the tenant's AP2
  merchant id, its ``nonce`` the ``offerId``, its ``sd_hash`` the base64url SHA-256 of the presentation
  up to the KB-JWT, its ``iat`` neither before the cart was signed nor in the future;
- ``transaction_data`` is an array of exactly two strings: what the caller compares with the hashes.

No AP2 SDK here: only joserfc, as for the checkout keys. Every refusal is a ``MandateRefused`` with
``invalid_credential``; nothing of the token is quoted.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import ECKey

from a2a_x402.extension import Ap2ErrorCode

from ._sdk import IssuerKeys, MandateRefused

__all__ = ["KB_JWT_TYPE", "verify_user_authorization"]

KB_JWT_TYPE = "kb+jwt"
"""The ``typ`` of the key-binding JWT (RFC 9901 §4.3)."""
_ALG = "ES256"
_SD_ALG = "sha-256"
_MAX_TOKEN_CHARS = 32 * 1024
_MAX_DISCLOSURES = 64
_HASHES = 2


def verify_user_authorization(
    token: object,
    issuers: IssuerKeys,
    *,
    audience: str,
    nonce: str,
    not_before: int,
    now: int,
    clock_skew_s: int = 300,
) -> tuple[str, ...]:
    """The ``transaction_data`` a valid ``user_authorization`` signs, after every check of the module doc.

    Args:
        token: the ``user_authorization`` as received.
        issuers: the issuer keys the tenant trusts.
        audience: the tenant's AP2 merchant id, the KB-JWT's ``aud``.
        nonce: the round's ``offerId``, the KB-JWT's ``nonce``.
        not_before: when the cart was signed (unix seconds): a key binding older than it is refused.
        now: the time of the check (unix seconds).
        clock_skew_s: the leeway on the issuer's and the holder's clocks.

    Raises:
        MandateRefused: ``invalid_credential``, saying which check failed.
    """
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_CHARS or not token.isascii():
        raise _refused("user_authorization is not an SD-JWT presentation")
    pieces = token.split("~")
    issued, disclosures, binding = pieces[0], pieces[1:-1], pieces[-1]
    if len(pieces) < 2 or not binding or len(disclosures) > _MAX_DISCLOSURES or "" in disclosures:
        raise _refused("user_authorization is not an SD-JWT presentation with a key-binding JWT")
    header = _header(issued, "issuer-signed JWT")
    kid = header.get("kid")
    key = issuers.by_kid.get(kid) if isinstance(kid, str) else None
    if key is None:
        raise _refused("user_authorization is not signed by an issuer the merchant trusts for this tenant")
    claims = _verified(issued, key, "issuer-signed JWT")
    if claims.get("_sd_alg", _SD_ALG) != _SD_ALG:
        raise _refused("user_authorization's SD-JWT uses a digest other than sha-256")
    _check_times(claims, now=now, clock_skew_s=clock_skew_s)
    named = set(_sd_digests(claims))
    if any(_digest(disclosure) not in named for disclosure in disclosures):
        raise _refused("user_authorization carries a disclosure its SD-JWT does not name")
    holder = _holder_key(claims)
    if _header(binding, "key-binding JWT").get("typ") != KB_JWT_TYPE:
        raise _refused(f"user_authorization's key-binding JWT is not of typ {KB_JWT_TYPE}")
    bound = _verified(binding, holder, "key-binding JWT")
    if bound.get("aud") != audience:
        raise _refused("user_authorization is addressed to another merchant (aud)")
    if bound.get("nonce") != nonce:
        raise _refused("user_authorization is bound to another offer (nonce)")
    if bound.get("sd_hash") != _digest(token[: len(token) - len(binding)]):
        raise _refused("user_authorization's sd_hash does not match its SD-JWT")
    iat = bound.get("iat")
    earliest, latest = not_before - clock_skew_s, now + clock_skew_s
    if not isinstance(iat, int) or isinstance(iat, bool) or not earliest <= iat <= latest:
        raise _refused("user_authorization's key binding is not of this round (iat)")
    hashes = bound.get("transaction_data")
    if not isinstance(hashes, list) or len(hashes) != _HASHES or not all(isinstance(h, str) for h in hashes):
        raise _refused("user_authorization's transaction_data is not the two hashes of §20.7")
    return tuple(hashes)


def _header(compact: str, what: str) -> dict[str, Any]:
    try:
        header = json.loads(_b64url_decode(compact.split(".", 1)[0]))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _refused(f"user_authorization's {what} has no readable header") from None
    if not isinstance(header, dict) or header.get("alg") != _ALG:
        raise _refused(f"user_authorization's {what} is not {_ALG}")
    return header


def _verified(compact: str, jwk: Mapping[str, Any], what: str) -> dict[str, Any]:
    try:
        public = ECKey.import_key(dict(jwk))
        payload = jws.deserialize_compact(compact, public, algorithms=[_ALG]).payload
        claims = json.loads(payload)
    except (JoseError, ValueError, TypeError, RecursionError):
        raise _refused(f"user_authorization's {what} does not verify") from None
    if not isinstance(claims, dict):
        raise _refused(f"user_authorization's {what} is not a JSON object")
    return claims


def _check_times(claims: Mapping[str, Any], *, now: int, clock_skew_s: int) -> None:
    exp, iat = claims.get("exp"), claims.get("iat")
    if exp is not None and (not _is_int(exp) or exp + clock_skew_s < now):
        raise _refused("user_authorization's credential has expired")
    if iat is not None and (not _is_int(iat) or iat > now + clock_skew_s):
        raise _refused("user_authorization's credential is issued in the future")


def _holder_key(claims: Mapping[str, Any]) -> Mapping[str, Any]:
    cnf = claims.get("cnf")
    jwk = cnf.get("jwk") if isinstance(cnf, Mapping) else None
    if not isinstance(jwk, Mapping) or (jwk.get("kty"), jwk.get("crv")) != ("EC", "P-256") or "d" in jwk:
        raise _refused("user_authorization's credential confirms no EC P-256 holder key (cnf.jwk)")
    return jwk


def _sd_digests(value: object) -> Iterator[object]:
    """Every digest an ``_sd`` array of the payload names, at any depth."""
    if isinstance(value, Mapping):
        for name, member in value.items():
            if name == "_sd" and isinstance(member, list):
                yield from member
            else:
                yield from _sd_digests(member)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping) and set(item) == {"..."}:
                yield item["..."]
            else:
                yield from _sd_digests(item)


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode("ascii")).digest()).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refused(detail: str) -> MandateRefused:
    return MandateRefused(Ap2ErrorCode.INVALID_CREDENTIAL, detail)
