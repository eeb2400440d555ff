"""The policy's rules for Permit2 `exact` and for `upto`: the transfer method chosen, the caps per task and
per UTC day (counted across tasks, under concurrency, released when nothing was signed; in memory and in a
`upto_days_file`), and the refusals
that name the cap and the amounts in display form."""

from __future__ import annotations

import threading
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from a2a_x402.facilitator.wire import PaymentRequirements
from a2a_x402.payer import AmountOverLimitError, NoAcceptableTermsError, PaymentPolicy, PayToNotPinnedError
from a2a_x402.payer import _budget as budget

from .test_policy import ASSET, CARD, NETWORK, OTHER_NETWORK, PRICE, entry, offer

FACILITATOR = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
MAXIMUM = 500_000
ZERO = "0x" + "0" * 40


def permit2(**changes: Any) -> PaymentRequirements:
    return entry(**{"extra": {"assetTransferMethod": "permit2"}, **changes})


def upto(**changes: Any) -> PaymentRequirements:
    return entry(
        **{"scheme": "upto", "amount": MAXIMUM, "extra": {"facilitatorAddress": FACILITATOR}, **changes}
    )


def metered(per_task: int = MAXIMUM, per_day: int | None = None, **others: Any) -> PaymentPolicy:
    return PaymentPolicy(upto_max_per_task_atomic=per_task, upto_max_per_day_atomic=per_day, **others)


def test_a_permit2_exact_is_chosen_like_an_eip3009_one_without_the_tokens_domain() -> None:
    assert PaymentPolicy().choose(offer(permit2()), CARD, "") == permit2()


def test_eip3009_is_preferred_for_the_same_price_and_the_merchants_order_otherwise() -> None:
    cheaper = permit2(amount=PRICE - 1)

    assert PaymentPolicy().choose(offer(permit2(), entry()), CARD, "") == entry()
    assert PaymentPolicy().choose(offer(cheaper, entry()), CARD, "") == cheaper
    assert PaymentPolicy().choose(offer(permit2(network=OTHER_NETWORK), permit2()), CARD, "") == permit2()


def test_upto_is_signed_only_under_a_cap_per_task() -> None:
    with pytest.raises(NoAcceptableTermsError, match="without a cap per task"):
        PaymentPolicy().choose(offer(upto()), CARD, "")

    assert metered().choose(offer(upto()), CARD, "") == upto()


def test_the_cap_per_task_is_inclusive_and_named_in_display_form() -> None:
    with pytest.raises(AmountOverLimitError) as over:
        metered(per_task=MAXIMUM - 1).choose(offer(upto()), CARD, "")

    assert str(over.value) == (
        f"upto maximum 0.5 USDC (500000 atomic units) on {NETWORK}: over the policy's upto cap per task of "
        "0.499999 USDC (499999 atomic units)"
    )
    assert (over.value.code, over.value.signed) == ("amount_over_limit", False)


def test_the_maximum_per_payment_bounds_an_upto_maximum_too() -> None:
    with pytest.raises(AmountOverLimitError, match="the policy's maximum of 0.25 USDC"):
        metered(max_amount_atomic=PRICE).choose(offer(upto()), CARD, "")


def test_the_cap_per_day_is_reached_across_tasks_and_released_when_nothing_was_signed() -> None:
    policy = metered(per_day=2 * MAXIMUM)
    first = policy.reserve(policy.choose(offer(upto()), CARD, ""), CARD)
    policy.reserve(policy.choose(offer(upto()), CARD, ""), CARD)

    with pytest.raises(AmountOverLimitError) as over:
        policy.choose(offer(upto()), CARD, "")
    first.release()
    first.release()  # once only
    third = policy.choose(offer(upto()), CARD, "")

    assert str(over.value) == (
        f"upto maximum 0.5 USDC (500000 atomic units) on {NETWORK}: over the policy's upto cap per day of "
        "1 USDC (1000000 atomic units) (1 USDC (1000000 atomic units) authorized today, UTC, by this process)"
    )
    assert third == upto()
    assert policy.upto_spent_today(NETWORK, ASSET) == MAXIMUM


def test_a_task_that_lost_the_race_for_the_days_cap_is_refused_at_reserve() -> None:
    policy = metered(per_day=MAXIMUM)
    chosen = [policy.choose(offer(upto()), CARD, "") for _ in range(2)]

    policy.reserve(chosen[0], CARD)
    with pytest.raises(AmountOverLimitError, match="cap per day"):
        policy.reserve(chosen[1], CARD)


@pytest.fixture(params=["in-memory", "in-a-file"])
def counted_in(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where the day's maxima are counted: the policy's memory, or a SQLite file (`upto_days_file`)."""
    return {} if request.param == "in-memory" else {"upto_days_file": tmp_path / "upto-days.sqlite"}


def test_concurrent_reservations_never_pass_the_cap_together(counted_in: dict[str, Any]) -> None:
    policy = metered(per_day=5 * MAXIMUM, **counted_in)
    outcomes: list[bool] = []
    start = threading.Barrier(20)

    def reserve() -> None:
        start.wait()
        try:
            policy.reserve(upto(), CARD)
            outcomes.append(True)
        except AmountOverLimitError:
            outcomes.append(False)

    threads = [threading.Thread(target=reserve) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (outcomes.count(True), outcomes.count(False)) == (5, 15)
    assert policy.upto_spent_today(NETWORK, ASSET) == 5 * MAXIMUM


def test_the_day_is_the_utc_day_and_each_asset_has_its_own(
    monkeypatch: pytest.MonkeyPatch, counted_in: dict[str, Any]
) -> None:
    policy = metered(per_day=MAXIMUM, **counted_in)
    monkeypatch.setattr(budget, "today", lambda: date(2026, 1, 1))
    policy.reserve(upto(), CARD)
    with pytest.raises(AmountOverLimitError):
        policy.reserve(upto(), CARD)

    policy.reserve(upto(network=OTHER_NETWORK), CARD)
    monkeypatch.setattr(budget, "today", lambda: date(2026, 1, 2))

    assert policy.upto_spent_today(NETWORK, ASSET) == 0
    policy.reserve(upto(), CARD)


def test_exact_reserves_nothing_and_policies_do_not_share_a_day() -> None:
    policy = metered(per_day=MAXIMUM)
    policy.reserve(entry(), CARD).release()
    policy.reserve(upto(), CARD)

    assert metered(per_day=MAXIMUM).upto_spent_today(NETWORK, ASSET) == 0
    assert metered(per_day=MAXIMUM) == metered(per_day=MAXIMUM)


@pytest.mark.parametrize(
    ("terms", "reason"),
    [
        pytest.param(upto(extra={}), "name no facilitator", id="no-facilitator"),
        pytest.param(upto(extra={"facilitatorAddress": ZERO}), "zero address", id="zero-facilitator"),
        pytest.param(upto(extra={"facilitatorAddress": ASSET}), "contract of the payment", id="token"),
        pytest.param(permit2(extra={"assetTransferMethod": "teleport"}), "'teleport'", id="method"),
        pytest.param(
            permit2(extra={"assetTransferMethod": "permit2", "name": "Other", "version": "2"}),
            "differs from the card's",
            id="other-domain",
        ),
    ],
)
def test_permit2_terms_the_policy_refuses(terms: PaymentRequirements, reason: str) -> None:
    with pytest.raises(NoAcceptableTermsError, match=reason):
        metered().choose(offer(terms), CARD, "")


def test_an_upto_paying_another_address_is_not_pinned_whoever_settles_it() -> None:
    with pytest.raises(PayToNotPinnedError, match=f"payTo {FACILITATOR}"):
        metered().choose(offer(upto(pay_to=FACILITATOR)), CARD, "")


def test_caps_must_be_non_negative_integers() -> None:
    with pytest.raises(ValueError, match="upto_max_per_day_atomic"):
        PaymentPolicy(upto_max_per_day_atomic=-1)
    with pytest.raises(ValueError, match="upto_max_per_task_atomic"):
        PaymentPolicy(upto_max_per_task_atomic=True)


def test_an_upto_maximum_of_the_whole_uint256_range_is_refused_in_display_form() -> None:
    huge = 2**256 - 1

    with pytest.raises(AmountOverLimitError) as over:
        metered().choose(offer(upto(amount=huge)), CARD, "")

    whole, fraction = divmod(huge, 10**6)
    assert f"upto maximum {whole}.{fraction:06d} USDC ({huge} atomic units)" in str(over.value)
    assert metered().upto_spent_today(NETWORK, ASSET) == 0
