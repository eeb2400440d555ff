"""Billing webhook events the payment layer writes with its own state changes: `settlement.pending` when
a settlement is still unconfirmed at the deadline, `settlement.failed` when the chain refuses it."""

from __future__ import annotations

import json
from collections.abc import Callable

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from eth_account import Account

from a2a_x402.devchain import DevChain, encode_call
from a2a_x402.merchant.demo_skill import TextStatsExecutor
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.merchant import (
    MerchantStarter,
    MerchantWire,
    offered_terms,
    payment_message,
    user_message,
)


async def _events(database_url: str) -> list[dict[str, object]]:
    engine = create_engine(database_url)
    try:
        stored = await Outbox(engine).events_since("")
    finally:
        await engine.dispose()
    return [json.loads(event.payload) for event in stored]


async def test_a_settlement_pending_at_the_deadline_is_announced(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    merchant = start_merchant(sqlite_url, settle_timeout_s=0.5)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        payload = sign_payment(new_payer(), offered_terms(task).accepts[0])
        chain.rpc.call("evm_setAutomine", [False])
        working = (await wire.send(payment_message(task["id"], payload)))["task"]
        chain.rpc.call("evm_mine")

    (pending,) = [e for e in await _events(sqlite_url) if e["type"] == "settlement.pending"]
    assert working["status"]["state"] == "TASK_STATE_WORKING"
    data = pending["data"]
    assert isinstance(data, dict)
    assert (data["taskId"], data["payer"], data["amount"]) == (
        task["id"],
        payload.payload.authorization.from_address,
        str(offered_terms(task).accepts[0].amount),
    )
    assert str(data["transaction"]).startswith("0x")


class _SpendsThePayersFundsWhileWorking(AgentExecutor):
    """Does the work, while the payer moves its tokens away (the settlement then has nothing to take)."""

    def __init__(self, chain: DevChain, payer_key: str) -> None:
        self._chain = chain
        self._payer_key = payer_key
        self._work = TextStatsExecutor()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        balance = self._chain.balance_of(Account.from_key(self._payer_key).address)
        data = encode_call(
            "transfer(address,uint256)", ["0x000000000000000000000000000000000000dEaD", balance]
        )
        self._chain.rpc.call("anvil_setBalance", [Account.from_key(self._payer_key).address, hex(10**18)])
        self._chain.rpc.transact(self._payer_key, to=self._chain.asset, data=data)
        await self._work.execute(context, event_queue)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await self._work.cancel(context, event_queue)


async def test_a_settlement_the_chain_refuses_is_announced_and_nothing_is_delivered(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    payer_key = new_payer()
    merchant = start_merchant(sqlite_url, delegate=_SpendsThePayersFundsWhileWorking(chain, payer_key))
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        payload = sign_payment(payer_key, offered_terms(task).accepts[0])
        answer = (await wire.send(payment_message(task["id"], payload)))["task"]

    # Insufficient funds can be cured: the task asks again, with fresh terms and no artifact.
    assert answer["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "artifacts" not in answer
    (failed,) = [e for e in await _events(sqlite_url) if e["type"] == "settlement.failed"]
    data = failed["data"]
    assert isinstance(data, dict)
    assert (data["taskId"], data["reason"]) == (task["id"], "invalid_exact_evm_insufficient_balance")
