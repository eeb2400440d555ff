"""`x402-merchant serve` stopped by SIGTERM, or by Ctrl-C (SIGINT), while a paid turn is in flight: it
stops gracefully (one line, exit status 0, no traceback) and the payment ends settled and booked (before
the stop, or by the next start's recovery), never lost."""

from __future__ import annotations

import asyncio
import signal

import pytest

from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.merchant import MerchantWire, payment_message

from .clients import open_task, pay, poll_until_definite
from .conftest import Scenario


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT-ctrl-c"])
async def test_a_stop_signal_with_a_paid_turn_in_flight_finishes_it_then_exits_0_in_one_line(
    scenario: Scenario, sig: signal.Signals
) -> None:
    """SIGTERM (a process manager) and SIGINT (Ctrl-C at the terminal) stop the real `serve` alike."""
    chain = scenario.chain
    merchant = await scenario.merchants.start(settle_timeout_s=20)
    assert merchant.process is not None
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        payload = sign_payment(scenario.new_payer(), terms)
        chain.rpc.call("evm_setAutomine", [False])
        try:
            paying = asyncio.create_task(pay(wire, task_id, payload))
            # In flight: the settlement is in the node's pool, the merchant waits for its receipt.
            await wait_until(
                lambda: int(chain.rpc.call("txpool_status")["pending"], 16) > 0,
                what="the settlement to be broadcast",
            )
            merchant.process.send_signal(sig)
            await asyncio.sleep(0)  # let the request stay in flight past the signal, as it would
            assert not paying.done()
            chain.rpc.call("evm_mine")
        finally:
            chain.rpc.call("evm_setAutomine", [True])
        answer = await paying
    returncode = await asyncio.to_thread(merchant.process.wait, HANG_S)

    assert answer["status"]["state"] == "TASK_STATE_COMPLETED"
    assert returncode == 0
    log = merchant.log_path.read_text()
    [stopped] = [line for line in log.splitlines() if "stopped" in line]
    assert stopped.endswith(f"x402-merchant stopped by {sig.name}: requests in flight were finished")
    assert "Traceback" not in log and "ERROR" not in log and "Aborted" not in log
    assert "KeyboardInterrupt" not in log
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert len(report.transfers) == 1 and report.booked_tasks == [task_id]


async def test_sigterm_with_a_paid_turn_running_in_the_background_hands_it_to_recovery(
    scenario: Scenario,
) -> None:
    """A `returnImmediately` paid turn has no request in flight to wait for: stopped mid-settlement, its
    payment is recovered by the next start (once the stopped process's claim lease, 1 s here, ran out),
    settled once and booked, never lost."""
    chain = scenario.chain
    merchant = await scenario.merchants.start(settle_timeout_s=20, claim_lease_s=1)
    assert merchant.process is not None
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        payload = sign_payment(scenario.new_payer(), terms)
        chain.rpc.call("evm_setAutomine", [False])
        try:
            await wire.send(payment_message(task_id, payload), {"returnImmediately": True})
            await wait_until(
                lambda: int(chain.rpc.call("txpool_status")["pending"], 16) > 0,
                what="the settlement to be broadcast",
            )
            merchant.process.send_signal(signal.SIGTERM)
            returncode = await asyncio.to_thread(merchant.process.wait, HANG_S)
        finally:
            chain.rpc.call("evm_setAutomine", [True])
    chain.rpc.call("evm_mine")

    assert returncode == 0
    log = merchant.log_path.read_text()
    [stopped] = [line for line in log.splitlines() if "stopped" in line]
    assert stopped.endswith("x402-merchant stopped by SIGTERM: requests in flight were finished")
    assert "Traceback" not in log and "ERROR" not in log
    restarted = await scenario.merchants.restart(
        merchant, reconcile_interval_s=0.5, reconcile_stale_after_s=0.5
    )
    async with restarted.http() as http:
        done = await poll_until_definite(MerchantWire(http, "jsonrpc"), task_id)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", (done["status"], log, restarted.log_tail())
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert len(report.transfers) == 1 and report.booked_tasks == [task_id]
