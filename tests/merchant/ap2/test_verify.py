"""The merchant's verification of a payment's mandates (§20.5), steps 1 to 5, with mandates the AP2 SDK
issues on the shopper's side (tests/fixtures/ap2.py): the payer's own presentation, and closed mandates
made by hand where the payer would refuse to present them.

No server and no chain: the x402 payments are real EIP-3009 signatures over terms built here. The
verification is pure: its only read is the usage record, which a test gives as a fixed value.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.extension import (
    Ap2Declaration,
    Ap2ErrorCode,
    Ap2Mandates,
    ap2_digest,
    payload_hash,
)
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequired, PaymentRequirements, ResourceInfo
from a2a_x402.merchant.ap2 import (
    AcceptedMandates,
    IssuerKeys,
    MandateRefused,
    MandateUsage,
    StoredCheckoutError,
    mandate_reference,
    verify_mandates,
)
from a2a_x402.payer import OpenMandates, present_mandates, sign_payment
from tests.fixtures.ap2 import (
    ASSET,
    MERCHANT,
    NETWORK,
    OTHER_MERCHANT,
    PAY_TO,
    PAYER_KEY,
    PRICE_CENTS,
    OpenTerms,
    checkout_jwt,
    close_mandates,
    issue_open_mandate_claims,
    issue_open_mandates,
    new_key,
    public_jwks,
)

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

PAYER = Account.from_key(PAYER_KEY).address
DECLARATION = Ap2Declaration(merchant=MERCHANT, jwks_url="https://merchant.example/.well-known/ap2/jwks.json")


class Round:
    """One round of a task: its offer, the checkout the merchant signed and stored, and a payment of it."""

    def __init__(self, *, now: int, price: int = PRICE_CENTS) -> None:
        self.offer_id = uuid.uuid4().hex
        self.requirements = PaymentRequirements(
            scheme="exact",
            network=NETWORK,
            asset=ASSET,
            amount=str(price * 10**4),  # a 6-decimal USD token at par: 10**(6 - 2) per cent
            pay_to=PAY_TO,
            max_timeout_seconds=300,
            extra={"name": "USDC", "version": "2", "offerId": self.offer_id},
        )
        required = PaymentRequired(
            x402_version=2,
            resource=ResourceInfo(url="https://merchant.example/s"),
            accepts=(self.requirements,),
        )
        self.price = price
        self.checkout_jwt = checkout_jwt(
            new_key("checkout-test"),
            offer_id=self.offer_id,
            required=required.to_json_dict(),
            total=price,
            now=now,
        )
        self.payment = self.another_payment()

    def another_payment(self) -> PaymentPayload:
        """A payment of the round's terms: each one another nonce, so another payload."""
        return PaymentPayload.from_wire(sign_payment(PAYER_KEY, self.requirements).to_json_dict())

    def closed_claims(self, payment: PaymentPayload | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The claims of the closed checkout and payment mandates the payer would present for ``payment``."""
        paid = payment or self.payment
        checkout_hash = ap2_digest(self.checkout_jwt)
        checkout = {"checkout_jwt": self.checkout_jwt, "checkout_hash": checkout_hash}
        closed_payment = {
            "transaction_id": checkout_hash,
            "payee": MERCHANT.to_wire(),
            "payment_amount": {"amount": self.price, "currency": "USD"},
            "payment_instrument": {
                "id": f"{NETWORK}:{PAYER}",
                "type": "x402",
                "payload_hash": payload_hash(paid.to_json_dict()),
            },
        }
        return checkout, closed_payment


class Usage:
    """A usage reader over fixed records, remembering what it was asked."""

    def __init__(self, record: MandateUsage | None = None) -> None:
        self.record = record or MandateUsage()
        self.asked: list[str] = []

    async def __call__(self, key: str) -> MandateUsage:
        self.asked.append(key)
        return self.record


@pytest.fixture
def now() -> int:
    # The SDK stamps each closing hop's `iat` with the wall clock, so the rounds live at that time.
    return int(time.time())


@pytest.fixture
def user_key() -> Any:
    return new_key("trusted-surface-test")


@pytest.fixture
def issuers(user_key: Any) -> IssuerKeys:
    return IssuerKeys.from_jwks(public_jwks(user_key))


def _open(user_key: Any, now: int, **terms: Any) -> OpenMandates:
    return issue_open_mandates(user_key, new_key(), OpenTerms(**terms), now=now)


def _present(opened: OpenMandates, paid: Round, *, now: int) -> Ap2Mandates:
    payload = paid.payment.to_json_dict()
    return present_mandates(opened, paid.checkout_jwt, payload, MERCHANT.id, paid.offer_id, now=now)


def _closed(
    opened: OpenMandates,
    paid: Round,
    *,
    checkout: Mapping[str, Any] | None = None,
    payment: Mapping[str, Any] | None = None,
    aud: str = MERCHANT.id,
    nonce: str | None = None,
    **changes: Any,
) -> Ap2Mandates:
    """Closed mandates made by hand: the payer's claims for the round, with ``changes`` to the payment
    mandate's claims."""
    good_checkout, good_payment = paid.closed_claims()
    return close_mandates(
        opened,
        checkout=checkout or good_checkout,
        payment=payment or (good_payment | changes),
        aud=aud,
        nonce=nonce or paid.offer_id,
    )


async def _verify(
    mandates: Ap2Mandates,
    paid: Round,
    issuers: IssuerKeys,
    *,
    now: int,
    usage: Usage | None = None,
    payment: PaymentPayload | None = None,
    declaration: Ap2Declaration = DECLARATION,
) -> AcceptedMandates:
    return await verify_mandates(
        declaration,
        issuers,
        checkout_jwt=paid.checkout_jwt,
        payment=payment or paid.payment,
        mandates=mandates,
        usage=usage or Usage(),
        now=now,
    )


async def _refused(code: Ap2ErrorCode, says: str, *args: Any, **kwargs: Any) -> MandateRefused:
    with pytest.raises(MandateRefused) as caught:
        await _verify(*args, **kwargs)
    assert caught.value.code is code, caught.value
    assert says in caught.value.detail
    assert "\n" not in str(caught.value)
    return caught.value


async def test_the_payers_mandates_are_accepted_with_what_the_ledger_and_receipts_need(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    paid = Round(now=now)
    mandates = _present(_open(user_key, now), paid, now=now)
    usage = Usage(MandateUsage(total=50, uses=2, last_used=now - 60))

    accepted = await _verify(mandates, paid, issuers, now=now, usage=usage)

    assert accepted.checkout_hash == ap2_digest(paid.checkout_jwt)
    assert accepted.checkout_id == paid.offer_id
    assert (accepted.amount, accepted.currency) == (PRICE_CENTS, "USD")
    assert accepted.payment_reference == mandate_reference(mandates.payment_mandate)
    assert accepted.checkout_reference == mandate_reference(mandates.checkout_mandate)
    assert accepted.open_mandate == accepted.payment.open_key
    assert usage.asked == [accepted.open_mandate]  # step 5 read the record of the open payment mandate
    subject = accepted.receipt_subject("task-1")
    assert (subject.order_id, subject.payment_id) == ("task-1", paid.offer_id)
    assert subject.payment_reference == accepted.payment_reference


async def test_the_record_is_keyed_by_the_open_mandate_whatever_it_discloses(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    """Two payments under one open mandate, presented with different disclosures (the payer keeps only
    the payee paid), count against one record."""
    opened = _open(user_key, now)
    first, second = Round(now=now), Round(now=now)
    trimmed = await _verify(_present(opened, first, now=now), first, issuers, now=now)
    whole = await _verify(_closed(opened, second), second, issuers, now=now)

    assert trimmed.open_mandate == whole.open_mandate
    assert trimmed.payment_reference != whole.payment_reference


async def test_a_payment_mandate_naming_another_payment_is_refused(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    paid = Round(now=now)
    mandates = _present(_open(user_key, now), paid, now=now)

    await _refused(
        Ap2ErrorCode.INVALID_MANDATE,
        "payload_hash",
        mandates,
        paid,
        issuers,
        now=now,
        payment=paid.another_payment(),
    )


async def test_mandates_for_another_checkout_are_refused(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    opened = _open(user_key, now)
    paid, other = Round(now=now), Round(now=now)
    other_checkout, _ = other.closed_claims()
    good_checkout, _ = paid.closed_claims()

    # The other round's checkout, bound to this round (its nonce): the stored checkout is not it.
    mandates = _closed(opened, paid, checkout=other_checkout)
    await _refused(
        Ap2ErrorCode.INVALID_MANDATE, "not for the checkout of this round", mandates, paid, issuers, now=now
    )
    # This round's checkout, under another hash.
    wrong_hash = good_checkout | {"checkout_hash": other_checkout["checkout_hash"]}
    mandates = _closed(opened, paid, checkout=wrong_hash)
    await _refused(Ap2ErrorCode.INVALID_MANDATE, "checkout_hash", mandates, paid, issuers, now=now)
    # A payment mandate naming the other checkout.
    mandates = _closed(opened, paid, transaction_id=other_checkout["checkout_hash"])
    await _refused(Ap2ErrorCode.INVALID_MANDATE, "transaction_id", mandates, paid, issuers, now=now)


async def test_another_payee_is_refused(user_key: Any, issuers: IssuerKeys, now: int) -> None:
    """The open mandate allows both payees, so only the binding to the tenant's merchant catches it."""
    opened = _open(user_key, now, payees=(MERCHANT, OTHER_MERCHANT))
    paid = Round(now=now)
    mandates = _closed(opened, paid, payee=OTHER_MERCHANT.to_wire())

    await _refused(
        Ap2ErrorCode.INVALID_MANDATE, "payee is not this merchant", mandates, paid, issuers, now=now
    )


@pytest.mark.parametrize(
    ("instrument", "says"),
    [
        ({"id": f"eip155:8453:{PAYER}"}, "not the account paying"),
        ({"id": f"{NETWORK}:0x0000000000000000000000000000000000000001"}, "not the account paying"),
        ({"id": PAYER}, "not the account paying"),
        ({"type": "card"}, "not of type x402"),
    ],
    ids=["another-network", "another-payer", "no-network", "not-x402"],
)
async def test_an_instrument_that_is_not_the_paying_account_is_refused(
    user_key: Any, issuers: IssuerKeys, now: int, instrument: dict[str, str], says: str
) -> None:
    paid = Round(now=now)
    _, claims = paid.closed_claims()
    mandates = _closed(
        _open(user_key, now), paid, payment_instrument=claims["payment_instrument"] | instrument
    )

    await _refused(Ap2ErrorCode.INVALID_MANDATE, says, mandates, paid, issuers, now=now)


async def test_the_payer_address_may_be_written_in_any_case(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    paid = Round(now=now)
    _, claims = paid.closed_claims()
    lower = claims["payment_instrument"] | {"id": f"{NETWORK}:{PAYER.lower()}"}

    await _verify(_closed(_open(user_key, now), paid, payment_instrument=lower), paid, issuers, now=now)


@pytest.mark.parametrize(
    ("terms", "amount", "says"),
    [
        ({}, {"amount": 20, "currency": "USD"}, "not the checkout's total of 25 USD"),
        ({}, {"amount": 25, "currency": "EUR"}, "not the checkout's total of 25 USD"),
        ({"max_amount": 20}, {"amount": 25, "currency": "USD"}, "exceeds maximum 20"),
        ({"min_amount": 30}, {"amount": 25, "currency": "USD"}, "below minimum 30"),
    ],
    ids=["not-the-total", "another-currency", "above-the-range", "below-the-range"],
)
async def test_an_amount_that_is_not_the_checkouts_or_outside_the_range_is_refused(
    user_key: Any, issuers: IssuerKeys, now: int, terms: dict[str, int], amount: dict[str, Any], says: str
) -> None:
    paid = Round(now=now)
    mandates = _closed(_open(user_key, now, **terms), paid, payment_amount=amount)

    await _refused(Ap2ErrorCode.INVALID_MANDATE, says, mandates, paid, issuers, now=now)


async def test_a_payment_beyond_the_budget_in_the_record_is_refused(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    paid = Round(now=now)
    mandates = _present(_open(user_key, now, budget=20.0), paid, now=now)
    spent = Usage(MandateUsage(total=1990, uses=3, last_used=now - 60))

    await _refused(Ap2ErrorCode.INVALID_MANDATE, "budget", mandates, paid, issuers, now=now, usage=spent)
    # Exactly at the budget is still within it.
    at_the_edge = Usage(MandateUsage(total=2000 - PRICE_CENTS, uses=3))
    await _verify(mandates, paid, issuers, now=now, usage=at_the_edge)


async def test_a_payment_beyond_the_occurrences_in_the_record_is_refused(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    paid = Round(now=now)
    mandates = _present(_open(user_key, now, max_occurrences=2), paid, now=now)

    used = Usage(MandateUsage(total=50, uses=2))
    await _refused(Ap2ErrorCode.INVALID_MANDATE, "occurrences", mandates, paid, issuers, now=now, usage=used)


async def test_an_expired_mandate_is_refused_before_anything_else(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    paid = Round(now=now)
    mandates = _present(_open(user_key, now, lifetime_s=600), paid, now=now)
    usage = Usage()

    await _refused(
        Ap2ErrorCode.INVALID_CREDENTIAL, "expired", mandates, paid, issuers, now=now + 600 + 301, usage=usage
    )
    assert usage.asked == []


async def test_mandates_for_an_expired_checkout_are_refused(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    paid = Round(now=now)  # the checkout expires 900 s after `now`
    mandates = _present(_open(user_key, now), paid, now=now)

    await _refused(
        Ap2ErrorCode.INVALID_MANDATE,
        "checkout of this round has expired",
        mandates,
        paid,
        issuers,
        now=now + 900 + 1,
    )


async def test_mandates_presented_to_another_merchant_are_refused(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    opened = _open(user_key, now, merchants=(MERCHANT, OTHER_MERCHANT))
    paid = Round(now=now)
    mandates = _present(opened, paid, now=now)
    elsewhere = Ap2Declaration(merchant=OTHER_MERCHANT, jwks_url=DECLARATION.jwks_url)

    await _refused(
        Ap2ErrorCode.INVALID_CREDENTIAL,
        "aud mismatch",
        mandates,
        paid,
        issuers,
        now=now,
        declaration=elsewhere,
    )
    # Closed for another audience, presented here.
    mandates = _closed(opened, paid, aud=OTHER_MERCHANT.id)
    await _refused(Ap2ErrorCode.INVALID_CREDENTIAL, "aud mismatch", mandates, paid, issuers, now=now)


async def test_mandates_replayed_in_another_round_are_refused(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    """The same presentation twice: in the next round its nonce is the previous round's checkout id."""
    opened = _open(user_key, now)
    first, second = Round(now=now), Round(now=now)
    mandates = _present(opened, first, now=now)
    await _verify(mandates, first, issuers, now=now)

    await _refused(Ap2ErrorCode.INVALID_CREDENTIAL, "nonce mismatch", mandates, second, issuers, now=now)
    # Bound to this round by hand, but with another nonce.
    await _refused(
        Ap2ErrorCode.INVALID_CREDENTIAL,
        "nonce mismatch",
        _closed(opened, second, nonce=first.offer_id),
        second,
        issuers,
        now=now,
    )


async def test_mandates_of_an_untrusted_issuer_are_refused(user_key: Any, now: int) -> None:
    paid = Round(now=now)
    mandates = _present(_open(user_key, now), paid, now=now)
    stranger = IssuerKeys.from_jwks(public_jwks(new_key("trusted-surface-test")))  # the same kid, another key
    elsewhere = IssuerKeys.from_jwks(public_jwks(new_key("another-surface")))

    await _refused(Ap2ErrorCode.INVALID_CREDENTIAL, "does not verify", mandates, paid, stranger, now=now)
    await _refused(Ap2ErrorCode.INVALID_CREDENTIAL, "not trusted", mandates, paid, elsewhere, now=now)


async def test_an_open_mandate_with_an_unknown_constraint_is_unresolved(
    user_key: Any, issuers: IssuerKeys, now: int
) -> None:
    agent = new_key()
    opened = issue_open_mandates(user_key, agent, OpenTerms(), now=now)
    unknown = issue_open_mandate_claims(
        user_key,
        agent,
        "mandate.payment.open.1",
        [{"type": "payment.carbon_offset", "grams": 5}],
        now=now,
        lifetime_s=3600,
    )
    paid = Round(now=now)
    checkout, payment = paid.closed_claims()
    mandates = close_mandates(
        opened, checkout=checkout, payment=payment, aud=MERCHANT.id, nonce=paid.offer_id, open_payment=unknown
    )

    await _refused(
        Ap2ErrorCode.UNRESOLVED_CONSTRAINT, "payment.carbon_offset", mandates, paid, issuers, now=now
    )


def _segment(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


_TOTAL = [{"type": "total", "amount": 1}]


@pytest.mark.parametrize(
    "stored",
    [
        "not.a-checkout.jwt",
        "only-two.segments",
        "h.%%%.s",
        "h.é.s",
        f"h.{_segment([1, 2])}.s",
        f"h.{_segment({'id': 'x', 'currency': 'USD', 'exp': 1, 'totals': 5})}.s",
        f"h.{_segment({'id': 'x', 'currency': 'USD', 'exp': 1, 'totals': None})}.s",
        f"h.{_segment({'id': 'x', 'currency': 'USD', 'exp': '1', 'totals': _TOTAL})}.s",
    ],
)
async def test_a_stored_checkout_that_is_not_one_is_the_merchants_error_not_a_refusal(
    user_key: Any, issuers: IssuerKeys, now: int, stored: str
) -> None:
    paid = Round(now=now)
    mandates = _present(_open(user_key, now), paid, now=now)
    paid.checkout_jwt = stored

    with pytest.raises(StoredCheckoutError, match="stored checkout") as raised:
        await _verify(mandates, paid, issuers, now=now)
    assert stored not in str(raised.value)
