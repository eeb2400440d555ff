"""`x402_merchant_differences_open{kind}` on the merchant's /metrics counts the open differences by kind
(every kind the reconciler names is there, at 0 when none is open), and drops one closed by an operator."""

from __future__ import annotations

from collections.abc import Callable

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.differences import acknowledge_difference
from tests.fixtures.merchant import MerchantStarter
from tests.fixtures.metrics import sample
from tests.merchant.test_operations import metrics_of

from .helpers import Passes, unexplained_payment

_OPEN = "x402_merchant_differences_open"


async def test_open_differences_are_counted_by_kind(
    database_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    settings, _ = await unexplained_payment(database_url, chain, start_merchant, new_payer)
    passes = Passes(settings)
    try:
        merchant = start_merchant(database_url)
        none_yet = await metrics_of(merchant)
        await passes.run()
        (difference,) = await passes.all()
        opened = await metrics_of(merchant)
        await acknowledge_difference(passes.store, difference.id, note="seen", by="test")
        closed = await metrics_of(merchant)
    finally:
        await passes.aclose()

    # (The merchant's own reconciler may already have stored the payment: its first pass runs at start.)
    kinds = ("reorged_out", "chain_restarted", "recovery_unproven", "chain_unavailable", "booked_differently")
    assert [sample(none_yet, _OPEN, kind=kind) for kind in kinds] == [0.0] * len(kinds)
    assert sample(opened, _OPEN, kind="unbooked_payment") == 1.0
    assert sample(closed, _OPEN, kind="unbooked_payment") == 0.0
