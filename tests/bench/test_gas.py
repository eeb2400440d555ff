"""The gas benchmark: every kind's payment settled by the x402 SDK's facilitator and by ours from the same
chain state, each checked; a settlement that moves another amount fails the check; the summary's figures."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import create_app
from bench._gas_payments import KINDS, Kind, make_payment
from bench.gas_bench import CheckFailed, Pair, Settlement, measure_pair, render
from tests.facilitator.payments import relayer_address, relayer_nonce
from tests.fixtures.facilitator import PAY_TO, facilitator_settings_on


@pytest.fixture
def ours_url(chain: DevChain, asgi_server: Callable[..., str], sqlite_url: str) -> str:
    return asgi_server(create_app(settings=facilitator_settings_on(chain, sqlite_url)))


@pytest.mark.parametrize("kind", KINDS, ids=[kind.label for kind in KINDS])
async def test_both_facilitators_settle_the_same_payment_from_the_same_state(
    kind: Kind, chain: DevChain, ours_url: str
) -> None:
    payment = make_payment(chain, kind, pay_to=PAY_TO, relayer=relayer_address(chain))
    nonce_before = relayer_nonce(chain)

    pair = await asyncio.to_thread(measure_pair, chain, PAY_TO, ours_url, payment)

    # The SDK's settlement was undone: only ours is left on chain.
    assert relayer_nonce(chain) == nonce_before + 1
    assert ("settleWithPermit" in pair.ours.call) == kind.sponsored
    for settlement in (pair.ours, pair.reference):
        assert settlement.gas_used > 21_000 and settlement.gas_limit >= settlement.gas_used
        assert not settlement.call.startswith("0x")  # a call the benchmark knows


async def test_a_settlement_of_another_amount_fails_the_check(chain: DevChain, ours_url: str) -> None:
    upto = next(kind for kind in KINDS if kind.scheme == "upto" and not kind.sponsored)
    payment = make_payment(chain, upto, pay_to=PAY_TO, relayer=relayer_address(chain))
    # Settled for the whole maximum where the work used 60 % of it.
    whole = dataclasses.replace(payment, charged=payment.requirements)

    with pytest.raises(CheckFailed, match="the SDK's facilitator moved"):
        await asyncio.to_thread(measure_pair, chain, PAY_TO, ours_url, whole)


def _settlement(gas_used: int, call: str = "upto proxy settle") -> Settlement:
    return Settlement(gas_used, 200_000, 1_500_000_000, 452, call, calldata=f"0x{gas_used:x}")


def test_the_summary_gives_medians_the_ratio_per_payment_and_the_identical_calldata() -> None:
    upto = next(kind for kind in KINDS if kind.scheme == "upto")
    pairs = [
        Pair(upto, reference=_settlement(100_000), ours=_settlement(90_000)),
        Pair(upto, reference=_settlement(110_000), ours=_settlement(110_000)),
        Pair(upto, reference=_settlement(120_000), ours=_settlement(96_000)),
    ]

    report = render(pairs, ["# header"])

    assert report.startswith("# header\n")
    [row] = [line for line in report.splitlines() if line.startswith(f"| {upto.label} ")]
    assert row == (
        f"| {upto.label} | 3 | 96,000 (90,000–110,000) / 110,000 (100,000–120,000) | 0.900x "
        "| 200,000 / 200,000 | 1.500 / 1.500 | 452 / 452 | 1 of 3 | upto proxy settle |"
    )
