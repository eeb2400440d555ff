"""The embedded flow's v0.2 form (specification §20.7): AP2 v0.1 carts on A2A 0.3.

A round offered in that form carries a ``CartMandate`` (``build_cart``): its ``contents.id`` is the
``offerId``, its ``payment_request.method_data`` has one entry, ``https://www.x402.org/``, whose ``data``
is the terms as that interface's x402 document (§13), its ``details.total`` the price in major units of
the tenant's currency (by the price rule of §20.3), and ``merchant_authorization`` a JWT of the tenant's
checkout key whose ``cart_hash`` is the base64url SHA-256 of the RFC 8785 form of ``contents``. The cart
is written with every member the AP2 v0.1 models dump (absent ones as ``null``), so that a client that
reads it into those models and dumps it again hashes the same JSON.

The client pays with a ``PaymentMandate`` (``verify_payment_mandate``): the cart's merchant authorization
is checked, then the ``user_authorization`` (``_user_authorization``), then what it binds: its two hashes
are those of the cart offered and of the ``payment_mandate_contents`` received, whose ``payment_response``
names ``https://www.x402.org/`` and the ``offerId``, and whose other members agree with the cart. The x402
payment in ``details`` is then the one the user signed for. No AP2 SDK is imported: the carts are JSON.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import rfc8785

from a2a_x402.extension import AP2_X402_METHOD, Ap2ErrorCode, Ap2Merchant, JsonValue, minor_unit_exponent

from ._checkout import merchant_issuer
from ._keys import CheckoutKeys, CheckoutTokenError
from ._sdk import IssuerKeys, MandateRefused
from ._user_authorization import verify_user_authorization

__all__ = [
    "build_cart",
    "cart_digest",
    "verify_payment_mandate",
]

_REFUND_PERIOD_DAYS = 0  # paid work is delivered at once and not refunded
_CONTENTS_MEMBERS = frozenset(
    {
        "payment_mandate_id",
        "payment_details_id",
        "payment_details_total",
        "payment_response",
        "merchant_agent",
        "timestamp",
    }
)
_RESPONSE_MEMBERS = frozenset(
    {
        "request_id",
        "method_name",
        "details",
        "shipping_address",
        "shipping_option",
        "payer_name",
        "payer_email",
        "payer_phone",
    }
)


def build_cart(
    terms: Mapping[str, JsonValue],
    *,
    offer_id: str,
    merchant: Ap2Merchant,
    keys: CheckoutKeys,
    title: str,
    total: int,
    currency: str,
    now: int,
    lifetime_s: int,
) -> dict[str, Any]:
    """The ``CartMandate`` of a round: ``terms`` (the v0.2 interface's x402 document) for ``total`` minor
    units of ``currency``, signed now with the tenant's checkout key, expiring after ``lifetime_s``.

    Raises:
        Ap2PriceError: a currency without a known minor unit.
    """
    amount = {"currency": currency, "value": total / 10 ** minor_unit_exponent(currency)}
    contents = {
        "id": offer_id,
        "user_cart_confirmation_required": False,
        "payment_request": {
            "method_data": [{"supported_methods": AP2_X402_METHOD, "data": dict(terms)}],
            "details": {
                "id": offer_id,
                "display_items": [_item(title, amount)],
                "shipping_options": None,
                "modifiers": None,
                "total": _item("Total", amount),
            },
            "options": None,
            "shipping_address": None,
        },
        "cart_expiry": datetime.fromtimestamp(now + lifetime_s, UTC).isoformat(),
        "merchant_name": merchant.name,
    }
    claims = {
        "iss": merchant_issuer(merchant),
        "sub": merchant.id,
        "iat": now,
        "exp": now + lifetime_s,
        "jti": offer_id,
        "cart_hash": cart_digest(contents),
    }
    return {"contents": contents, "merchant_authorization": keys.sign(claims)}


def _item(label: str, amount: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    return {"label": label, "amount": dict(amount), "pending": None, "refund_period": _REFUND_PERIOD_DAYS}


def cart_digest(value: Mapping[str, Any]) -> str:
    """The base64url (no padding) SHA-256 of the RFC 8785 form of ``value``: ``cart_hash`` and the two
    hashes ``user_authorization`` signs.

    Raises:
        MandateRefused: ``invalid_mandate``, a value without a canonical form (an integer beyond 2**53).
    """
    try:
        canonical = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeError):
        raise MandateRefused(Ap2ErrorCode.INVALID_MANDATE, "a mandate has no RFC 8785 form") from None
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()


def verify_payment_mandate(
    cart: Mapping[str, Any],
    mandate: Mapping[str, Any],
    *,
    keys: CheckoutKeys,
    issuers: IssuerKeys,
    merchant_id: str,
    now: int,
) -> Mapping[str, Any]:
    """The x402 payment (``payment_response.details``) a ``PaymentMandate`` authorizes for ``cart``.

    Args:
        cart: the ``CartMandate`` the round offered, as stored with the offer.
        mandate: the client's ``PaymentMandate`` as received (its data part's value).
        keys: the tenant's checkout keys (the cart's ``merchant_authorization``).
        issuers: the issuer keys the tenant trusts (``user_authorization``).
        merchant_id: the tenant's AP2 merchant id: ``aud`` and ``merchant_agent``.
        now: the time of the check (unix seconds).

    Raises:
        MandateRefused: ``invalid_credential`` for a mandate not of the form or a signature that fails,
            ``invalid_mandate`` for one that does not authorize this cart's payment.
    """
    contents, authorization = _read(mandate)
    offer_id = str(cart["contents"]["id"])
    try:
        signed = keys.verify(cart["merchant_authorization"])
    except CheckoutTokenError:
        raise MandateRefused(
            Ap2ErrorCode.INVALID_MANDATE, "the cart offered no longer verifies with a checkout key"
        ) from None
    if signed.get("cart_hash") != cart_digest(cart["contents"]):
        raise MandateRefused(Ap2ErrorCode.INVALID_MANDATE, "the cart offered does not match its cart_hash")
    if now > int(signed["exp"]):  # the merchant's own clock set it: no skew to allow for
        raise MandateRefused(Ap2ErrorCode.INVALID_MANDATE, "the cart has expired")
    signed_cart, signed_contents = verify_user_authorization(
        authorization, issuers, audience=merchant_id, nonce=offer_id, not_before=int(signed["iat"]), now=now
    )
    if signed_cart != cart_digest(cart):
        raise MandateRefused(Ap2ErrorCode.INVALID_MANDATE, "user_authorization signs another CartMandate")
    if signed_contents != cart_digest(contents):
        raise MandateRefused(
            Ap2ErrorCode.INVALID_MANDATE, "user_authorization signs other payment_mandate_contents"
        )
    response = contents["payment_response"]
    total = cart["contents"]["payment_request"]["details"]["total"]
    for agrees, what in (
        (response["request_id"] == offer_id, "payment_response.request_id is not the offerId"),
        (contents["payment_details_id"] == offer_id, "payment_details_id is not the offerId"),
        (
            response["method_name"] == AP2_X402_METHOD,
            f"payment_response.method_name is not {AP2_X402_METHOD}",
        ),
        (contents["merchant_agent"] == merchant_id, "merchant_agent is not this merchant's AP2 id"),
        (cart_digest(contents["payment_details_total"]) == cart_digest(total), "another total"),
    ):
        if not agrees:
            raise MandateRefused(Ap2ErrorCode.INVALID_MANDATE, what)
    details: Mapping[str, Any] = response["details"]
    return details


def _read(mandate: Mapping[str, Any]) -> tuple[Mapping[str, Any], object]:
    """The ``payment_mandate_contents`` and ``user_authorization`` of a ``PaymentMandate`` of the form."""
    contents = mandate.get("payment_mandate_contents")
    if set(mandate) - {"payment_mandate_contents", "user_authorization"} or not isinstance(contents, Mapping):
        raise _malformed("a PaymentMandate has payment_mandate_contents and user_authorization only")
    if not _CONTENTS_MEMBERS >= set(contents) >= _CONTENTS_MEMBERS - {"timestamp"}:
        raise _malformed("payment_mandate_contents does not have the members of AP2 v0.1")
    response = contents["payment_response"]
    if not isinstance(response, Mapping) or not _RESPONSE_MEMBERS >= set(response) >= {
        "request_id",
        "method_name",
        "details",
    }:
        raise _malformed("payment_response does not have the members of AP2 v0.1")
    if not isinstance(response["details"], Mapping):
        raise _malformed("payment_response.details is not the x402 payment")
    texts = (contents["payment_mandate_id"], contents["merchant_agent"], response["request_id"])
    if not all(isinstance(text, str) for text in texts) or not isinstance(
        contents["payment_details_total"], Mapping
    ):
        raise _malformed("payment_mandate_contents has a member of the wrong type")
    return contents, mandate.get("user_authorization")


def _malformed(detail: str) -> MandateRefused:
    return MandateRefused(Ap2ErrorCode.INVALID_CREDENTIAL, f"malformed PaymentMandate: {detail}")
