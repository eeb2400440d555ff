"""The merchant SIGKILLed at each step of settling a paid turn made with AP2 mandates (the embedded flow,
§20; EIP-3009 underneath), then restarted on the same database (`crashes`).

The mandates were accepted and their use counted with the payment's presentation, before the merchant
was killed. After the restart the client, polling its task, sees it completed; the payee was paid once,
booked once with the round's AP2 references, and the open mandate counts that one payment once, whatever
recovery went through (invariant 8), even when the client presents the same payment and mandates again
while recovery finishes the round.
"""

from __future__ import annotations

import pytest

from tests.fixtures.merchant import A2ACallError, MerchantWire

from .clients import pay, poll_until_definite
from .conftest import Scenario
from .crashes import STEPS, completed_after_a_restart, killed_at
from .payments import AP2

_CENTS = AP2.charged // 10**4  # the price in the checkout's USD cents: the token's 6 decimals at par

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)


@pytest.mark.parametrize("step", STEPS)
async def test_a_merchant_killed_mid_ap2_settlement_finishes_the_paid_turn_counted_once_after_a_restart(
    step: str,
    scenario: Scenario,
) -> None:
    merchant, task_id, _ = await killed_at(step, scenario, AP2)

    await completed_after_a_restart(merchant, task_id, scenario, AP2)


@pytest.mark.parametrize(
    "step",
    [
        pytest.param("sent", id="after the node took the transaction, before the merchant heard"),
        pytest.param("outbox", id="after the booking and the offer commit, before the task is told"),
    ],
)
async def test_the_same_payment_and_mandates_presented_again_after_a_restart_are_counted_once(
    step: str,
    scenario: Scenario,
) -> None:
    """The client, which got no answer, presents its payment with the same mandates again to the restarted
    merchant while recovery finishes the round: it is the same use of the open mandate, counted once."""
    merchant, task_id, stop = await killed_at(step, scenario, AP2)
    restarted = await scenario.merchants.restart(
        merchant, rpc_url=scenario.chain.rpc_url, reconcile_interval_s=0.5, reconcile_stale_after_s=0.5
    )
    async with restarted.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        try:
            again = (await pay(wire, task_id, stop.signed.wire, stop.signed.mandates))["status"]["state"]
        except A2ACallError as refused:
            again = f"error {refused.reason or refused.rpc_code}"
        done = await poll_until_definite(wire, task_id)

    # A payment being taken is never answered with the request to pay: a client would take it as one.
    assert again != "TASK_STATE_INPUT_REQUIRED"
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert [t.amount for t in report.transfers] == [AP2.charged]
    assert report.ap2_booked_tasks == [task_id]
    assert await scenario.database.scalar("SELECT total FROM ap2_mandate_usage") == _CENTS
    assert await scenario.database.scalar("SELECT uses FROM ap2_mandate_usage") == 1
