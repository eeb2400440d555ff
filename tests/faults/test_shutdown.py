"""`x402-merchant serve` stopped by SIGTERM while a paid turn is in flight: it stops gracefully (one line,
exit status 0) and the payment ends settled and booked, never lost."""

from __future__ import annotations

import asyncio
import signal

from payer import sign_payment
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import MerchantWire

from .clients import open_task, pay
from .conftest import Scenario

_EXIT_TIMEOUT_S = 30.0


async def test_sigterm_with_a_paid_turn_in_flight_finishes_it_then_exits_0_in_one_line(
    scenario: Scenario,
) -> None:
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
            merchant.process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0)  # let the request stay in flight past the signal, as it would
            assert not paying.done()
            chain.rpc.call("evm_mine")
        finally:
            chain.rpc.call("evm_setAutomine", [True])
        answer = await paying
    returncode = await asyncio.to_thread(merchant.process.wait, _EXIT_TIMEOUT_S)

    assert answer["status"]["state"] == "TASK_STATE_COMPLETED"
    assert returncode == 0
    log = merchant.log_path.read_text()
    [stopped] = [line for line in log.splitlines() if "stopped" in line]
    assert stopped.endswith("x402-merchant stopped by SIGTERM: requests in flight were finished")
    assert "Traceback" not in log and "ERROR" not in log and "Aborted" not in log
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert len(report.transfers) == 1 and report.booked_tasks == [task_id]
