"""The kit's one door to the AP2 SDK (``ap2``, an optional extra): keys, open mandates, closing hops, and
the AP2 v0.1 carts and payment mandates of §20.7.

The kit plays the user's Trusted Surface (with the issuer key the operator gives, or a key of its own for
the untrusted-issuer check) and the client's agent, so it issues open mandates and closes them over a round
as AP2 v0.2 does. On A2A 0.3 it reads the merchant's ``CartMandate`` with the SDK's v0.1 model and pays
with a v0.1 ``PaymentMandate`` whose ``user_authorization`` is an SD-JWT of the issuer key for the agent's
key (issued with ``sd_jwt``, as the SDK does) and a key-binding JWT (``jwcrypto``) over the two hashes.
The SDK is imported on first use, never at module import, so that a run without it still checks
everything but the mandates; before anything of it runs, its file log is pointed at ``os.devnull``
(it appends whole presentation tokens to a file inside its install). Claims go to the SDK as plain JSON,
so that the kit can also present the wrong ones its checks need. No SDK type leaves this module except as
an opaque key, and no token or key is put in an error.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any, NamedTuple

from a2a_x402.extension import AP2_X402_METHOD, payload_hash
from a2a_x402.observability import drop_debug_lines

__all__ = [
    "Ap2SdkError",
    "generate_key",
    "import_key",
    "issue",
    "payment_mandate",
    "present",
    "public_jwk",
    "read_cart",
    "sdk_problem",
]


INSTALL_HINT = (
    "the AP2 SDK is not installed: install it with `pip install --no-deps` from the AP2 repository, then "
    "`pip install 'a2a-x402-merchant[ap2]'` (docs/conformance.md)"
)


_LIFETIME_S = 3600


class Ap2SdkError(Exception):
    """The SDK is missing, or refused to make a key or mandate (one line, no token material)."""


class _Sdk(NamedTuple):
    client: Any
    jwk: Any
    claims: Any
    v01: Any
    """``ap2.models.mandate``: the v0.1 cart and payment mandate models."""
    response: Any
    """``ap2.models.payment_request.PaymentResponse``."""
    sd_issuer: Any
    """``sd_jwt.issuer.SDJWTIssuer``."""
    jws: Any


@cache
def _sdk() -> _Sdk:
    try:
        import ap2.sdk.mandate as mandate
    except ImportError:
        raise Ap2SdkError(INSTALL_HINT) from None
    mandate.LOG_FILE_PATH = os.devnull
    drop_debug_lines("sd_jwt")  # it logs each claim a mandate discloses at DEBUG, values included
    import ap2.models.mandate as v01
    import jwcrypto.jwk as jwk
    import jwcrypto.jws as jws
    from ap2.models.payment_request import PaymentResponse
    from pydantic import BaseModel, ConfigDict
    from sd_jwt.issuer import SDJWTIssuer

    class Claims(BaseModel):
        """Claims already in their JSON form, dumped as they are."""

        model_config = ConfigDict(extra="allow")

    return _Sdk(mandate.MandateClient(), jwk, Claims, v01, PaymentResponse, SDJWTIssuer, jws)


def sdk_problem() -> str:
    """Why the kit cannot issue mandates (``""``: the SDK is there)."""
    try:
        _sdk()
    except Ap2SdkError as missing:
        return str(missing)
    return ""


def generate_key(kid: str) -> Any:
    """A fresh EC P-256 key named ``kid`` (opaque)."""
    return _sdk().jwk.JWK.generate(kty="EC", crv="P-256", kid=kid)


def import_key(members: Mapping[str, str]) -> Any:
    """The private EC P-256 JWK of ``members`` (opaque).

    Raises:
        Ap2SdkError: the members are no usable EC P-256 private key.
    """
    try:
        key = _sdk().jwk.JWK(**dict(members))
        key.get_op_key("sign")
    except Ap2SdkError:
        raise
    except Exception:  # jwcrypto and cryptography raise several types; none may repeat the key
        raise Ap2SdkError("the issuer key is not a usable EC P-256 private JWK") from None
    return key


def public_jwk(key: Any) -> dict[str, Any]:
    """The public members of ``key``."""
    public: dict[str, Any] = json.loads(key.export_public())
    return public


def issue(issuer_key: Any, claims: Mapping[str, Any]) -> str:
    """An open mandate of ``claims`` (taken as they are, none selectively disclosed) signed by
    ``issuer_key``.

    Raises:
        Ap2SdkError: the SDK refused the claims.
    """
    sdk = _sdk()
    try:
        token: str = sdk.client.create([sdk.claims(**claims)], issuer_key)
    except Exception as error:  # the SDK's words are about the claims' form, never the key
        raise Ap2SdkError(f"the AP2 SDK could not issue a mandate: {type(error).__name__}") from None
    return token


def present(agent_key: Any, open_token: str, claims: Mapping[str, Any], *, aud: str, nonce: str) -> str:
    """The chain of ``open_token`` and a closing hop of ``claims`` that ``agent_key`` signs for ``aud`` and
    ``nonce`` (every disclosure of the open mandate kept).

    Raises:
        Ap2SdkError: the SDK refused to close the mandate.
    """
    sdk = _sdk()
    try:
        token: str = sdk.client.present(agent_key, open_token, [sdk.claims(**claims)], nonce=nonce, aud=aud)
    except Exception as error:  # the SDK's words are about the token's form, never the key
        raise Ap2SdkError(f"the AP2 SDK could not close a mandate: {type(error).__name__}") from None
    return token


def read_cart(value: Any) -> dict[str, Any]:
    """The AP2 v0.1 ``CartMandate`` ``value`` as the SDK's model reads and writes it (JSON).

    Raises:
        Ap2SdkError: the SDK is missing, or ``value`` does not validate against its model.
    """
    sdk = _sdk()
    try:
        cart: dict[str, Any] = sdk.v01.CartMandate.model_validate(value).model_dump(mode="json")
    except Exception as error:  # pydantic's ValidationError; its text may quote the merchant at length
        count = error.error_count() if hasattr(error, "error_count") else 1
        raise Ap2SdkError(
            f"the CartMandate does not validate against the AP2 v0.1 model ({count} errors)"
        ) from None
    return cart


def payment_mandate(
    cart: Mapping[str, Any],
    payment: Mapping[str, Any],
    *,
    user_key: Any,
    agent_key: Any,
    merchant_id: str,
    now: int,
    signed_payment: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The AP2 v0.1 ``PaymentMandate`` paying ``cart`` (as ``read_cart`` gives it) with the x402 ``payment``
    in ``details``, as JSON: its ``user_authorization`` is an SD-JWT ``user_key`` issued for ``agent_key``,
    with a key-binding JWT of ``agent_key`` for ``merchant_id`` and the ``offerId`` over the hashes of the
    cart and of the ``payment_mandate_contents`` (of ``signed_payment`` instead, when given: the user
    signed another payment than the one sent).

    Raises:
        Ap2SdkError: the SDK is missing or refused the mandate.
    """
    sdk = _sdk()
    contents = cart["contents"]
    details = contents["payment_request"]["details"]

    def contents_for(paid: Mapping[str, Any]) -> dict[str, Any]:
        made = sdk.v01.PaymentMandateContents(
            payment_mandate_id=f"pm-{contents['id']}",
            payment_details_id=details["id"],
            payment_details_total=details["total"],
            payment_response=sdk.response(
                request_id=contents["id"], method_name=AP2_X402_METHOD, details=dict(paid)
            ),
            merchant_agent=merchant_id,
            timestamp=datetime.fromtimestamp(now, UTC).isoformat(),
        )
        dumped: dict[str, Any] = made.model_dump(mode="json")
        return dumped

    try:
        sent = contents_for(payment)
        hashes = [payload_hash(dict(cart)), payload_hash(contents_for(signed_payment or payment))]
        authorization = _user_authorization(
            sdk, user_key, agent_key, hashes, aud=merchant_id, nonce=str(contents["id"]), now=now
        )
        mandate = sdk.v01.PaymentMandate(payment_mandate_contents=sent, user_authorization=authorization)
        made: dict[str, Any] = mandate.model_dump(mode="json")
    except Exception as error:  # the SDK's words are about the mandate's form, never the keys
        raise Ap2SdkError(f"the AP2 SDK could not make a PaymentMandate: {type(error).__name__}") from None
    return made


def _b64url_sha256(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode("ascii")).digest()).rstrip(b"=").decode()


def _user_authorization(
    sdk: _Sdk, user_key: Any, agent_key: Any, hashes: list[str], *, aud: str, nonce: str, now: int
) -> str:
    """An SD-JWT of ``user_key`` confirming ``agent_key`` (``cnf``), then a ``kb+jwt`` of ``agent_key``
    binding it to ``aud``, ``nonce`` and ``hashes`` (``transaction_data``), as §20.7 reads it."""
    issued = sdk.sd_issuer(
        {"iat": now, "exp": now + _LIFETIME_S, "vct": "ap2.user_authorization"},
        user_key,
        holder_key=agent_key,
        sign_alg="ES256",
        extra_header_parameters={"typ": "dc+sd-jwt", "kid": public_jwk(user_key)["kid"]},
    )
    presented: str = issued.sd_jwt_issuance
    claims = {
        "iat": now,
        "aud": aud,
        "nonce": nonce,
        "sd_hash": _b64url_sha256(presented),
        "transaction_data": hashes,
    }
    binding = sdk.jws.JWS(json.dumps(claims).encode())
    binding.add_signature(agent_key, alg="ES256", protected=json.dumps({"alg": "ES256", "typ": "kb+jwt"}))
    token: str = binding.serialize(compact=True)
    return presented + token
