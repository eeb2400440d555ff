"""A round's checkout (§20.3): the claims of the checkout JWT, from the terms the merchant offered, signed.

The checkout is a UCP checkout as AP2 reads it, ready to complete, whose ``x402`` claim is the terms
themselves (the same JSON value as the ``required`` of the status message) and whose ``id`` is their
``offerId``. Its total is the terms' price in minor units of the checkout's currency, by the price rule
(``a2a_x402.extension.checkout_total_for_amount``): every entry of ``accepts`` must be in a token the
tenant takes at par with that currency and come to the same whole number of minor units. Terms that fail
this are offered without a checkout: ``CheckoutNotOffered`` says why, and nothing is signed.

The checkout expires when the offer does: the merchant counts an offer as expired once it is older than
its terms' ``maxTimeoutSeconds`` (``payments._unpaid``), so ``exp`` is ``iat`` plus the smallest
``maxTimeoutSeconds`` of the entries, never later than the merchant honours the terms (§20.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from a2a_x402.extension import (
    Ap2Merchant,
    Ap2PriceError,
    ap2_digest,
    checkout_total_for_amount,
    minor_unit_exponent,
)
from a2a_x402.facilitator.wire import PaymentRequired

from ._keys import CheckoutKeys

__all__ = [
    "CheckoutItem",
    "CheckoutNotOffered",
    "NotOfferedReason",
    "ParAsset",
    "SignedCheckout",
    "checkout_claims",
    "merchant_issuer",
    "sign_checkout",
]

_LINE_ITEM_ID = "li-1"
_STATUS = "ready_for_complete"


class NotOfferedReason(StrEnum):
    """Why terms go out without a checkout artifact."""

    NOT_AT_PAR = "not_at_par"
    """An entry is in a token the tenant does not take at par with the checkout's currency."""
    NOT_WHOLE_MINOR_UNITS = "not_whole_minor_units"
    """A price that is not a whole number of minor units (a sub-cent price for USD)."""
    UNKNOWN_CURRENCY = "unknown_currency"
    """A currency whose minor unit the price rule does not know."""
    PRICES_DIFFER = "prices_differ"
    """The entries come to different totals: one checkout cannot name them all."""


class CheckoutNotOffered(Exception):
    """Terms the embedded flow cannot carry: they are offered without a checkout artifact.

    Attributes:
        reason: which rule the terms fail.
        detail: one line for the operator's log.
    """

    def __init__(self, reason: NotOfferedReason, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}")


@dataclass(frozen=True, slots=True)
class ParAsset:
    """A token the tenant takes at par with the checkout's currency (a USD stablecoin for USD), with the
    ``decimals`` the card's ``params.assets`` gives it."""

    network: str
    address: str
    decimals: int

    def __post_init__(self) -> None:
        if (
            isinstance(self.decimals, bool)
            or not isinstance(self.decimals, int)
            or not 0 <= self.decimals <= 77
        ):
            raise ValueError("an asset's decimals are an integer from 0 to 77")


@dataclass(frozen=True, slots=True)
class CheckoutItem:
    """What is bought: ``id`` is what an open checkout mandate's line-item constraint names (the skill),
    ``title`` what a person reads."""

    id: str
    title: str

    def __post_init__(self) -> None:
        if not self.id or not self.title:
            raise ValueError("a checkout item needs an id and a title")


@dataclass(frozen=True, slots=True)
class SignedCheckout:
    """A round's checkout: the JWT for the ``ap2-checkout`` artifact and what the merchant keeps of it.

    Attributes:
        jwt: the checkout JWT, compact, to be stored with the offer and sent unchanged.
        claims: its payload.
        checkout_hash: ``ap2_digest(jwt)``: what the closed checkout mandate's ``checkout_hash`` and the
            payment mandate's ``transaction_id`` must be.
        total: the checkout's total in minor units of ``claims["currency"]``.
        expires_at: its ``exp`` (unix seconds).
    """

    jwt: str
    claims: Mapping[str, Any]
    checkout_hash: str
    total: int
    expires_at: int


def merchant_issuer(merchant: Ap2Merchant) -> str:
    """The ``iss`` of what the merchant signs for a tenant: its website, else its AP2 ``id`` (§20.3)."""
    return merchant.website if merchant.website else merchant.id


def checkout_claims(
    terms: PaymentRequired,
    *,
    merchant: Ap2Merchant,
    item: CheckoutItem,
    assets: Iterable[ParAsset],
    currency: str,
    now: int,
    links: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The checkout claims of ``terms`` (§20.3), issued at ``now`` (unix seconds).

    ``links`` are the UCP links by type (``terms_of_service``, ``privacy_policy``) to their URLs.

    Raises:
        CheckoutNotOffered: the terms fail the price rule (see ``NotOfferedReason``).
        ValueError: terms that are not the embedded flow's (an entry without ``extra.offerId``, or two
            offer ids), or a negative ``now``.
    """
    if isinstance(now, bool) or not isinstance(now, int) or now < 0:
        raise ValueError("now is a non-negative number of unix seconds")
    offer_id = _offer_id(terms)
    total = _total(terms, assets, currency)
    totals = [{"type": "subtotal", "amount": total}, {"type": "total", "amount": total}]
    line_item = {
        "id": _LINE_ITEM_ID,
        "item": {"id": item.id, "title": item.title, "price": total},
        "quantity": 1,
        "totals": [dict(entry) for entry in totals],
    }
    valid_for = min(entry.max_timeout_seconds for entry in terms.accepts)
    return {
        "id": offer_id,
        "merchant": merchant.to_wire(),
        "line_items": [line_item],
        "status": _STATUS,
        "currency": currency,
        "totals": totals,
        "links": [{"type": kind, "url": url} for kind, url in (links or {}).items()],
        "x402": terms.to_json_dict(),
        "iss": merchant_issuer(merchant),
        "iat": now,
        "exp": now + valid_for,
    }


def sign_checkout(
    terms: PaymentRequired,
    keys: CheckoutKeys,
    *,
    merchant: Ap2Merchant,
    item: CheckoutItem,
    assets: Iterable[ParAsset],
    currency: str,
    now: int,
    links: Mapping[str, str] | None = None,
) -> SignedCheckout:
    """The checkout of ``terms``, signed with the tenant's current checkout key (``checkout_claims``).

    Raises:
        CheckoutNotOffered: the terms fail the price rule: offer them without a checkout artifact.
        ValueError: as ``checkout_claims``.
    """
    claims = checkout_claims(
        terms, merchant=merchant, item=item, assets=assets, currency=currency, now=now, links=links
    )
    jwt = keys.sign(claims)
    return SignedCheckout(
        jwt=jwt,
        claims=claims,
        checkout_hash=ap2_digest(jwt),
        total=next(entry["amount"] for entry in claims["totals"] if entry["type"] == "total"),
        expires_at=claims["exp"],
    )


def _offer_id(terms: PaymentRequired) -> str:
    """The one ``offerId`` every entry carries (§20.3)."""
    ids = {(entry.extra or {}).get("offerId") for entry in terms.accepts}
    if len(ids) != 1:
        raise ValueError("the entries of the terms carry different offerIds; one checkout names one offer")
    [offer_id] = ids
    if not isinstance(offer_id, str) or not offer_id:
        raise ValueError("every entry of the terms needs extra.offerId for a checkout")
    return offer_id


def _total(terms: PaymentRequired, assets: Iterable[ParAsset], currency: str) -> int:
    """The checkout total every entry's amount comes to, at par, in minor units of ``currency``."""
    try:
        minor_unit_exponent(currency)
    except Ap2PriceError as exc:
        raise CheckoutNotOffered(NotOfferedReason.UNKNOWN_CURRENCY, str(exc)) from None
    decimals = {(asset.network, asset.address.lower()): asset.decimals for asset in assets}
    totals: set[int] = set()
    for index, entry in enumerate(terms.accepts):
        found = decimals.get((entry.network, entry.asset.lower()))
        if found is None:
            raise CheckoutNotOffered(
                NotOfferedReason.NOT_AT_PAR,
                f"accepts[{index}]: {entry.asset} on {entry.network} is not taken at par with {currency}",
            )
        try:
            totals.add(checkout_total_for_amount(entry.amount, decimals=found, currency=currency))
        except Ap2PriceError as exc:
            raise CheckoutNotOffered(
                NotOfferedReason.NOT_WHOLE_MINOR_UNITS, f"accepts[{index}]: {exc}"
            ) from None
    if len(totals) != 1:
        raise CheckoutNotOffered(
            NotOfferedReason.PRICES_DIFFER, f"the entries come to {len(totals)} different totals"
        )
    [total] = totals
    return total
