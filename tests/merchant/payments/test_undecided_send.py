"""A settlement whose send failed while the chain could not be read: the facilitator answers pending
naming no transaction, and the paid turn leaves the task working with the outcome not known yet (no
pending receipt, which must name a transaction) for the reconciler to finish, never failed with "nothing
was charged" for a payer the chain charged."""

from __future__ import annotations

from collections.abc import Callable

from a2a_x402.devchain import DevChain
from a2a_x402.payer import sign_payment
from tests.fixtures.gateways import Gateway, sends_answered_with_an_error
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    MerchantStarter,
    MerchantWire,
    ledger_entries,
    offered_terms,
    payment_message,
)

from .flows import extension, offer, texts

_SETTLE_BUDGET_S = 60.0


async def test_a_send_whose_outcome_the_chain_cannot_tell_leaves_the_task_working(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    payer_key: str,
    asgi_server: Callable[..., str],
) -> None:
    gateway = Gateway()
    front = asgi_server(sends_answered_with_an_error(chain.rpc_url, gateway))
    # The settle's budget covers its own verification through the gateway before the send: a short one ran
    # out there on a busy machine, and nothing was sent ("the chain could not be reached", the task failed
    # truthfully). Once the send is answered, the gateway's 503s end the settle at once, whatever the budget.
    merchant = start_merchant(sqlite_url, rpc_url=front, settle_timeout_s=_SETTLE_BUDGET_S)
    payee_before = chain.balance_of(DEFAULT_PAY_TO)
    try:
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            [terms] = offered_terms(task).accepts
            gateway.down_after_send = True

            working = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms))))["task"]
    finally:
        gateway.restore()

    assert working["status"]["state"] == "TASK_STATE_WORKING", working["status"]
    data = extension(working)
    assert (data["status"], data.get("receipts", [])) == ("payment-verified", [])
    assert texts(working) == [
        "The settlement's outcome is not known yet (the facilitator could not be reached, or could not read "
        "the chain); the task completes or fails when it is."
    ]
    # The chain took the send the gateway answered with an error: the payer is charged, not yet booked.
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + terms.amount
    assert await ledger_entries(merchant.database_url) == []
