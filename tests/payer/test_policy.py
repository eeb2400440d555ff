"""Which entry of ``accepts`` the policy signs, and why it refuses the others."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequirements, ResourceInfo
from a2a_x402.payer import (
    AmountOverLimitError,
    CardAsset,
    CardPayee,
    CardPaymentTerms,
    NoAcceptableTermsError,
    PaymentPolicy,
    PayToNotPinnedError,
)

NETWORK = "eip155:84532"
OTHER_NETWORK = "eip155:8453"
ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
OTHER_ASSET = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"
TENANT_PAY_TO = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"
PRICE = 250_000

CARD = CardPaymentTerms(
    networks=frozenset({NETWORK}),
    assets=(CardAsset(NETWORK, ASSET, "USDC", "2", 6),),
    pay_to=(CardPayee(NETWORK, "", PAY_TO), CardPayee(NETWORK, "acme", TENANT_PAY_TO)),
)


def entry(**changes: Any) -> PaymentRequirements:
    fields: dict[str, Any] = {
        "scheme": "exact",
        "network": NETWORK,
        "asset": ASSET,
        "amount": PRICE,
        "pay_to": PAY_TO,
        "max_timeout_seconds": 300,
        "extra": {"name": "USDC", "version": "2"},
    }
    fields.update(changes)
    return PaymentRequirements(**fields)


def offer(*accepts: PaymentRequirements) -> PaymentRequired:
    return PaymentRequired(
        x402_version=2, resource=ResourceInfo(url="https://shop.example/s"), accepts=accepts
    )


def test_choose_takes_the_first_signable_entry_not_blindly_the_first() -> None:
    wanted = entry()

    chosen = PaymentPolicy().choose(
        offer(entry(network=OTHER_NETWORK), entry(scheme="upto"), wanted), CARD, ""
    )

    assert chosen == wanted


def test_choose_pins_pay_to_per_tenant() -> None:
    assert PaymentPolicy().choose(offer(entry(pay_to=TENANT_PAY_TO)), CARD, "acme").pay_to == TENANT_PAY_TO
    with pytest.raises(PayToNotPinnedError, match="tenant ''"):
        PaymentPolicy().choose(offer(entry(pay_to=TENANT_PAY_TO)), CARD, "")


def test_choose_reports_the_refusal_of_the_entry_that_got_furthest() -> None:
    entries = offer(entry(asset=OTHER_ASSET), entry(pay_to=TENANT_PAY_TO), entry(scheme="upto"))

    with pytest.raises(PayToNotPinnedError) as caught:
        PaymentPolicy().choose(entries, CARD, "")

    assert caught.value.code == "pay_to_not_pinned"


def test_choose_caps_the_amount_inclusively() -> None:
    policy = PaymentPolicy(max_amount_atomic=PRICE)

    assert policy.choose(offer(entry()), CARD, "").amount == PRICE
    with pytest.raises(AmountOverLimitError, match=str(PRICE)):
        policy.choose(offer(entry(amount=PRICE + 1)), CARD, "")


@pytest.mark.parametrize(
    ("policy", "terms", "reason"),
    [
        pytest.param(PaymentPolicy(), entry(scheme="upto"), "scheme 'upto'", id="scheme"),
        pytest.param(
            PaymentPolicy(), entry(network=OTHER_NETWORK), "does not list this network", id="card-net"
        ),
        pytest.param(PaymentPolicy(), entry(asset=OTHER_ASSET), "does not list this asset", id="card-asset"),
        pytest.param(PaymentPolicy(), entry(extra=None), "EIP-712 domain", id="no-domain"),
        pytest.param(
            PaymentPolicy(), entry(extra={"name": "USD Coin", "version": "2"}), "differs", id="other-domain"
        ),
        pytest.param(
            PaymentPolicy(networks=frozenset({OTHER_NETWORK})), entry(), "does not pay on", id="net"
        ),
        pytest.param(
            PaymentPolicy(assets=frozenset({OTHER_ASSET})), entry(), "does not pay with", id="asset"
        ),
    ],
)
def test_choose_refuses_terms_it_cannot_or_may_not_sign(
    policy: PaymentPolicy, terms: PaymentRequirements, reason: str
) -> None:
    with pytest.raises(NoAcceptableTermsError, match=reason) as caught:
        policy.choose(offer(terms), CARD, "")

    assert (caught.value.code, caught.value.signed) == ("no_acceptable_terms", False)


def test_policy_keeps_assets_checksummed_and_refuses_a_negative_cap() -> None:
    assert PaymentPolicy(assets=frozenset({ASSET.lower()})).assets == frozenset({ASSET})
    with pytest.raises(ValueError, match="non-negative"):
        PaymentPolicy(max_amount_atomic=-1)
