"""The payer's closed mandates (§20.4) against the merchant's verifier (§20.5), both through the AP2 SDK.

No server and no chain: the x402 payments are real EIP-3009 signatures (`sign_payment`) over terms built
here, and the mandates are issued by a "user" key of the test (tests/fixtures/ap2.py). The payer's own
refusals come before anything is presented; the merchant's come from `a2a_x402.merchant.ap2`.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.extension import Ap2ErrorCode, Ap2Mandates, payload_hash
from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequirements, ResourceInfo
from a2a_x402.merchant.ap2 import (
    IssuerKeys,
    MandateKind,
    MandateRefused,
    MandateUsage,
    VerifiedMandate,
    check_checkout_mandate,
    check_payment_mandate,
    verify_mandate,
)
from a2a_x402.payer import MandateConstraintError, OpenMandates, present_mandates, sign_payment
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
    issue_open_mandates,
    new_key,
    public_jwks,
)

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)


class Round:
    """One round of a task: its offer, the checkout the merchant signed, and a payment of it."""

    def __init__(self, checkout_key: Any, *, now: int) -> None:
        self.offer_id = uuid.uuid4().hex
        requirements = PaymentRequirements(
            scheme="exact",
            network=NETWORK,
            asset=ASSET,
            amount=str(PRICE_CENTS * 10**4),  # a 6-decimal USD token at par: 10**(6 - 2) per cent
            pay_to=PAY_TO,
            max_timeout_seconds=300,
            extra={"name": "USDC", "version": "2", "offerId": self.offer_id},
        )
        required = PaymentRequired(
            x402_version=2, resource=ResourceInfo(url="https://merchant.example/s"), accepts=(requirements,)
        )
        self.checkout_jwt = checkout_jwt(
            checkout_key, offer_id=self.offer_id, required=required.to_json_dict(), total=PRICE_CENTS, now=now
        )
        self.payload = sign_payment(PAYER_KEY, requirements).to_json_dict()
        self.requirements = requirements

    def another_payment(self) -> dict[str, Any]:
        """A second payment of the same terms: another nonce, so another payload."""
        return sign_payment(PAYER_KEY, self.requirements).to_json_dict()


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


@pytest.fixture
def checkout_key() -> Any:
    return new_key("checkout-test")


def _open(user_key: Any, now: int, **terms: Any) -> OpenMandates:
    return issue_open_mandates(user_key, new_key(), OpenTerms(**terms), now=now)


def _present(opened: OpenMandates, paid: Round, *, now: int, merchant_id: str = MERCHANT.id) -> Ap2Mandates:
    return present_mandates(opened, paid.checkout_jwt, paid.payload, merchant_id, paid.offer_id, now=now)


def _verified(
    mandates: Ap2Mandates, issuers: IssuerKeys, *, nonce: str, now: int, audience: str = MERCHANT.id
) -> tuple[VerifiedMandate, VerifiedMandate]:
    return (
        verify_mandate(
            MandateKind.CHECKOUT, mandates.checkout_mandate, issuers, audience=audience, nonce=nonce, now=now
        ),
        verify_mandate(
            MandateKind.PAYMENT, mandates.payment_mandate, issuers, audience=audience, nonce=nonce, now=now
        ),
    )


def _merchant_accepts(
    mandates: Ap2Mandates, paid: Round, issuers: IssuerKeys, *, now: int, usage: MandateUsage
) -> VerifiedMandate:
    checkout, payment = _verified(mandates, issuers, nonce=paid.offer_id, now=now)
    check_checkout_mandate(checkout, checkout_jwt=paid.checkout_jwt)
    check_payment_mandate(
        payment,
        transaction_id=checkout.closed_claims["checkout_hash"],
        open_checkout_hash=checkout.open_hash,
        usage=usage,
    )
    return payment


def test_the_payers_closed_mandates_pass_the_merchants_verifier_and_name_the_payment(
    user_key: Any, issuers: IssuerKeys, checkout_key: Any, now: int
) -> None:
    opened = _open(user_key, now)
    paid = Round(checkout_key, now=now)

    mandates = _present(opened, paid, now=now)

    assert set(mandates.to_wire()) == {"ap2.checkout_mandate", "ap2.payment_mandate"}
    payment = _merchant_accepts(mandates, paid, issuers, now=now, usage=MandateUsage())
    claims = payment.closed_claims
    payer = Account.from_key(PAYER_KEY).address
    assert claims["payment_instrument"] == {
        "id": f"{NETWORK}:{payer}",
        "type": "x402",
        "payload_hash": payload_hash(paid.payload),
    }
    assert claims["payee"] == MERCHANT.to_wire()
    assert claims["payment_amount"] == {"amount": PRICE_CENTS, "currency": "USD"}
    # Only what the payment needs is disclosed: the payee paid, not every payee the user allows.
    [payees] = [c for c in payment.open_claims["constraints"] if c["type"] == "payment.allowed_payees"]
    assert payees["allowed"] == [MERCHANT.to_wire()]
    assert OTHER_MERCHANT.id not in mandates.payment_mandate
    assert (opened.spent, opened.uses) == (PRICE_CENTS, 1)


def test_the_budget_refuses_at_the_payer_after_the_payments_it_allows(
    user_key: Any, issuers: IssuerKeys, checkout_key: Any, now: int
) -> None:
    opened = _open(user_key, now, budget=1.0)  # four payments of 25 cents
    for paid_before in range(4):
        paid = Round(checkout_key, now=now)
        usage = MandateUsage(total=paid_before * PRICE_CENTS, uses=paid_before)
        _merchant_accepts(_present(opened, paid, now=now), paid, issuers, now=now, usage=usage)

    with pytest.raises(MandateConstraintError) as caught:
        _present(opened, Round(checkout_key, now=now), now=now)

    assert caught.value.constraint == "payment.budget"
    assert caught.value.code == "mandate_constraint"
    assert "\n" not in str(caught.value)
    assert (opened.spent, opened.uses) == (100, 4)  # the refused payment was not counted


@pytest.mark.parametrize(
    ("terms", "constraint"),
    [
        ({"payees": (OTHER_MERCHANT,)}, "payment.allowed_payees"),
        ({"max_amount": 20}, "payment.amount_range"),
        ({"min_amount": 50}, "payment.amount_range"),
        ({"merchants": (OTHER_MERCHANT,)}, "checkout.allowed_merchants"),
        (
            {"instruments": (f"{NETWORK}:0x0000000000000000000000000000000000000001",)},
            "payment.allowed_payment_instruments",
        ),
        ({"lifetime_s": -60}, "exp"),
    ],
    ids=[
        "payee-not-allowed",
        "above-range",
        "below-range",
        "merchant-not-allowed",
        "other-wallet",
        "expired",
    ],
)
def test_a_payment_outside_the_open_mandates_is_refused_before_anything_is_presented(
    user_key: Any, checkout_key: Any, now: int, terms: dict[str, Any], constraint: str
) -> None:
    opened = _open(user_key, now, **terms)

    with pytest.raises(MandateConstraintError) as caught:
        _present(opened, Round(checkout_key, now=now), now=now)

    assert caught.value.constraint == constraint
    assert (opened.spent, opened.uses) == (0, 0)


def test_the_merchant_refuses_mandates_that_name_another_payment(
    user_key: Any, issuers: IssuerKeys, checkout_key: Any, now: int
) -> None:
    """The mandates verify, but the payment beside them is not the one the payment mandate names: the
    merchant's binding check (§20.5 step 4) compares these two hashes."""
    paid = Round(checkout_key, now=now)
    mandates = _present(_open(user_key, now), paid, now=now)
    payment = _merchant_accepts(mandates, paid, issuers, now=now, usage=MandateUsage())

    swapped = paid.another_payment()

    assert payment.closed_claims["payment_instrument"]["payload_hash"] != payload_hash(swapped)


def test_the_merchant_refuses_mandates_presented_to_another_merchant(
    user_key: Any, issuers: IssuerKeys, checkout_key: Any, now: int
) -> None:
    opened = _open(user_key, now, merchants=(MERCHANT, OTHER_MERCHANT))
    paid = Round(checkout_key, now=now)
    mandates = _present(opened, paid, now=now)

    with pytest.raises(MandateRefused) as caught:
        _verified(mandates, issuers, nonce=paid.offer_id, now=now, audience=OTHER_MERCHANT.id)

    assert caught.value.code is Ap2ErrorCode.INVALID_CREDENTIAL
    assert "aud mismatch" in caught.value.detail


def test_the_merchant_refuses_an_expired_mandate(
    user_key: Any, issuers: IssuerKeys, checkout_key: Any, now: int
) -> None:
    opened = _open(user_key, now, lifetime_s=600)
    paid = Round(checkout_key, now=now)
    mandates = _present(opened, paid, now=now)

    with pytest.raises(MandateRefused) as caught:
        _verified(mandates, issuers, nonce=paid.offer_id, now=now + 600 + 301)

    assert caught.value.code is Ap2ErrorCode.INVALID_CREDENTIAL
    assert "expired" in caught.value.detail


def test_the_merchant_refuses_mandates_replayed_for_another_checkout(
    user_key: Any, issuers: IssuerKeys, checkout_key: Any, now: int
) -> None:
    opened = _open(user_key, now)
    first, second = Round(checkout_key, now=now), Round(checkout_key, now=now)
    mandates = _present(opened, first, now=now)

    with pytest.raises(MandateRefused) as caught:
        _verified(mandates, issuers, nonce=second.offer_id, now=now)
    assert caught.value.code is Ap2ErrorCode.INVALID_CREDENTIAL
    assert "nonce mismatch" in caught.value.detail

    # Bound to the first round, the checkout mandate does not name the second round's checkout either.
    checkout, _ = _verified(mandates, issuers, nonce=first.offer_id, now=now)
    with pytest.raises(MandateRefused) as named:
        check_checkout_mandate(checkout, checkout_jwt=second.checkout_jwt)
    assert named.value.code is Ap2ErrorCode.INVALID_MANDATE


def test_the_payer_refuses_a_nonce_merchant_or_payment_that_is_not_the_checkouts(
    user_key: Any, checkout_key: Any, now: int
) -> None:
    opened = _open(user_key, now)
    paid = Round(checkout_key, now=now)

    with pytest.raises(MandateConstraintError) as caught:
        present_mandates(opened, paid.checkout_jwt, paid.payload, MERCHANT.id, "another-round", now=now)
    assert caught.value.constraint == "nonce"
    with pytest.raises(MandateConstraintError) as caught:
        _present(opened, paid, now=now, merchant_id=OTHER_MERCHANT.id)
    assert caught.value.constraint == "merchant"
    other_round = Round(checkout_key, now=now)
    with pytest.raises(MandateConstraintError) as caught:
        present_mandates(opened, paid.checkout_jwt, other_round.payload, MERCHANT.id, paid.offer_id, now=now)
    assert caught.value.constraint == "payment"
    assert (opened.spent, opened.uses) == (0, 0)


def test_the_agent_key_is_never_shown(user_key: Any, checkout_key: Any, now: int) -> None:
    opened = _open(user_key, now)
    secret = opened.agent_key["d"]
    assert secret not in repr(opened)

    broken = replace(opened, agent_key={**opened.agent_key, "x": opened.agent_key["y"]})
    with pytest.raises(MandateConstraintError) as caught:
        _present(broken, Round(checkout_key, now=now), now=now)

    assert caught.value.constraint == "agent_key"
    assert secret not in str(caught.value)
    assert secret not in json.dumps(caught.value.args)
