"""`x402-merchant reconcile` on a difference it cannot resolve: an authorization to the tenant's payTo
that the merchant never took (submitted to the chain directly, no offer behind it) is reported on stderr,
nothing is booked for it, and the command exits 1; on the same records before it, the command exits 0."""

from __future__ import annotations

import pytest

from a2a_x402.payer import sign_payment
from tests.facilitator.payments import submit_directly
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantWire, ledger_entries

from .clients import open_task, pay
from .conftest import Scenario


async def test_a_payment_no_offer_explains_is_unresolved_and_reconcile_exits_1(scenario: Scenario) -> None:
    merchant = await scenario.merchants.start()
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        assert (await pay(wire, task_id, sign_payment(scenario.new_payer(), terms)))["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )
        _, unpaid_terms = await open_task(wire)
    merchant.stop()
    clean = await scenario.merchants.reconcile(merchant)
    assert clean.returncode == 0 and "unresolved" not in clean.stderr, clean

    stray = sign_payment(scenario.new_payer(), unpaid_terms)
    submit_directly(scenario.chain, stray)
    unresolved = await scenario.merchants.reconcile(merchant)

    assert unresolved.returncode == 1, unresolved
    (line,) = [line for line in unresolved.stderr.splitlines() if line.startswith("unresolved: ")]
    assert f"paid to {DEFAULT_PAY_TO} by {stray.payload.authorization.from_address}" in line, line
    assert "no offer was paid with its authorization" in line
    assert "booked from the chain 0" in unresolved.stdout
    assert [entry.task_id for entry in await ledger_entries(scenario.database_url)] == [
        task_id
    ]  # nothing invented
    with pytest.raises(AssertionError, match="1: transfer .* is booked 0 times"):
        await scenario.invariants()
