"""The chain's RPC node unreachable at each stage of a paid turn: verify, broadcast, receipt wait.

The merchant talks to the node through a proxy that cuts it off at the chosen request. Whatever the client
is told must be true: "failed, nothing charged" only when nothing was, and a working task that completes
once the node is back otherwise. The send lost (the request, or its answer after the node took it) is
shown for each transfer method (`payments.KINDS`) and for a payment made with AP2 mandates, whose use is
then counted once; the node unreachable during verify, for that payment too: its round failed, so its
use no longer counts.
"""

from __future__ import annotations

import pytest

from a2a_x402.extension import PaymentErrorCode, PaymentFailedData
from a2a_x402.payer import sign_payment
from tests.fixtures.merchant import MerchantWire, payment_data

from .clients import open_offer, open_task, pay, poll_until_definite
from .conftest import Scenario
from .payments import AP2, EIP3009, KINDS, PaymentKind


@pytest.mark.parametrize("kind", [EIP3009.param(), AP2.param()])
async def test_the_node_unreachable_during_verify_fails_the_task_uncharged(
    kind: PaymentKind, scenario: Scenario
) -> None:
    merchant = await scenario.start(kind, rpc_url=scenario.proxy.url)
    payer_key = scenario.new_payer(kind)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms, checkout = await open_offer(wire)
        signed = scenario.sign(kind, payer_key, terms, checkout)
        scenario.proxy.offline = True
        answer = await pay(wire, task_id, signed.wire, signed.mandates)
        scenario.proxy.offline = False

    assert answer["status"]["state"] == "TASK_STATE_FAILED"
    # The code ends the task (SETTLEMENT_FAILED is not retryable), so the words cannot say "try again" on it:
    # they say what happened, that nothing was charged, and what the payer can do.
    data = payment_data(answer)
    assert isinstance(data, PaymentFailedData) and data.error is PaymentErrorCode.SETTLEMENT_FAILED
    parts = answer["status"]["message"]["parts"]
    [text] = [part["text"] for part in parts if "text" in part]
    assert text == (
        "Payment verification failed: the facilitator could not be reached, or could not reach the chain; "
        "nothing was charged; this task has ended: send the request again later for new terms"
    )
    # With mandates, the error receipts ride beside the text (§20.6): the mandates' budget was not used.
    receipts = [part["data"] for part in parts if "ap2.payment_receipt" in part.get("data", {})]
    assert len(receipts) == (1 if kind.ap2 else 0)
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_FAILED"})
    assert report.transfers == []
    # The mandates were accepted (their use counted) before the node was found unreachable.
    uses = "SELECT count(*) FROM ap2_mandate_uses WHERE task_id = :task_id"
    assert await scenario.database.scalar(uses, task_id=task_id) == (1 if kind.ap2 else 0)


@pytest.mark.parametrize("kind", [*KINDS, AP2.param()])
@pytest.mark.parametrize(
    "delivered", [pytest.param(False, id="request lost"), pytest.param(True, id="answer lost")]
)
async def test_the_node_unreachable_when_the_settlement_is_sent_settles_it_once(
    delivered: bool,
    kind: PaymentKind,
    scenario: Scenario,
) -> None:
    merchant = await scenario.start(kind, rpc_url=scenario.proxy.url, settle_timeout_s=2)
    payer_key = scenario.new_payer(kind)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms, checkout = await open_offer(wire)
        signed = scenario.sign(kind, payer_key, terms, checkout)
        # The send (and, for 2 s, every other request) is lost: whether the node took the transaction is
        # unknown to the merchant, so it must neither report "nothing charged" nor send a second one.
        cut = scenario.proxy.outage(b"eth_sendRawTransaction", seconds=2.0, deliver=delivered)
        await pay(wire, task_id, signed.wire, signed.mandates)
        assert cut.hits == 1
        done = await poll_until_definite(wire, task_id)

    report = await scenario.invariants(client_views={task_id: done["status"]["state"]})
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [transfer.amount for transfer in report.transfers] == [kind.charged]
    assert report.ap2_booked_tasks == ([task_id] if kind.ap2 else [])


@pytest.mark.parametrize(
    "outage_s",
    [
        pytest.param(0.5, id="within the deadline"),
        pytest.param(3.0, id="past the deadline"),
    ],
)
async def test_the_node_unreachable_during_the_receipt_wait_leaves_a_task_that_completes(
    outage_s: float,
    scenario: Scenario,
) -> None:
    merchant = await scenario.merchants.start(rpc_url=scenario.proxy.url, settle_timeout_s=2)
    payer_key = scenario.new_payer()
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        cut = scenario.proxy.outage(b"eth_getTransactionReceipt", seconds=outage_s, deliver=False)
        await pay(wire, task_id, sign_payment(payer_key, terms))
        assert cut.hits == 1
        # Past the deadline the answer is a working task naming its transaction; the client polls it.
        done = await poll_until_definite(wire, task_id)

    report = await scenario.invariants(client_views={task_id: done["status"]["state"]})
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(report.transfers) == 1
