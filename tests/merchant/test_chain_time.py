"""The reference merchant (in-process facilitator) against chain time: a chain idle for minutes still takes
a fresh payment, verified and settled, and a head ahead of the clock asks again, with fresh terms, for a
payment that would expire before a new block could include it, charging nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from a2a_x402.devchain import DevChain
from a2a_x402.extension import PaymentCompletedData, PaymentErrorCode, PaymentRequiredData
from a2a_x402.payer import sign_payment
from tests.fixtures.chain import clock_ahead, idle_for
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    payment_data,
    payment_message,
    user_message,
)


async def _pay(merchant: RunningMerchant, key: str, before_paying: Callable[[], Any]) -> dict[str, Any]:
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        payload = sign_payment(key, offered_terms(task).accepts[0])
        before_paying()
        answer: dict[str, Any] = (await wire.send(payment_message(task["id"], payload)))["task"]
    return answer


async def test_a_chain_idle_for_ten_minutes_takes_a_fresh_payment(
    merchant: RunningMerchant, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    payee_before = chain.balance_of(DEFAULT_PAY_TO)

    done = await _pay(merchant, new_payer(), lambda: idle_for(chain.rpc, 600))

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", payment_data(done)
    assert isinstance(payment_data(done), PaymentCompletedData)
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + DEFAULT_PRICE
    [entry] = await ledger_entries(merchant.database_url)
    assert entry.task_id == done["id"]


async def test_a_head_ahead_of_the_clock_asks_again_for_a_payment_that_would_expire_first(
    merchant: RunningMerchant, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    payee_before = chain.balance_of(DEFAULT_PAY_TO)

    answer = await _pay(merchant, new_payer(), lambda: clock_ahead(chain.rpc, 3600))

    assert answer["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    data = payment_data(answer)
    assert isinstance(data, PaymentRequiredData) and data.error == PaymentErrorCode.EXPIRED_PAYMENT
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before
    assert await ledger_entries(merchant.database_url) == []
