"""Every change of a payment's state is a compare-and-set (issue 24 point 5).

A client's `payment-rejected`, or a `CancelTask`, racing the client's own payment: one of them wins before
anything is verified, and the other is refused or answered with the task's true state. In every round,
on SQLite and PostgreSQL alike, the stored task, the offer row, the chain, the ledger and the webhook
outbox tell the same story: paid (COMPLETED, `paid` and booked, charged once, one booking, one
`settlement.completed`), or canceled (CANCELED, `rejected`, nothing charged, booked or sent).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.payments import OfferState, OfferStore
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import (
    DEFAULT_PRICE,
    A2ACallError,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    payment_message,
    rejection_message,
)

from .flows import JSON, offer
from .test_handler import terms_of

ROUNDS = 20
"""Rounds of each race per database: enough to have seen both outcomes, bounded for suite time."""
_FINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED"}
_RACERS: dict[str, Callable[[MerchantWire, str], Awaitable[Any]]] = {
    "payment-rejected": lambda wire, task_id: wire.send(rejection_message(task_id)),
    "CancelTask": lambda wire, task_id: wire.cancel(task_id),
}


async def completed_events(database_url: str, task_id: str) -> int:
    """How many `settlement.completed` webhook events the outbox holds for the task."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            statement = sa.text("SELECT payload FROM webhook_events WHERE type = 'settlement.completed'")
            rows = (await connection.execute(statement)).all()
        return sum(json.loads(bytes(row[0]))["data"].get("taskId") == task_id for row in rows)
    finally:
        await engine.dispose()


async def offer_row(database_url: str, task_id: str) -> Any:
    """The task's offer row."""
    engine = create_engine(database_url)
    try:
        return await OfferStore(engine).get(task_id)
    finally:
        await engine.dispose()


async def ended(wire: MerchantWire, task_id: str, round_: int) -> JSON:
    """The stored task once it has ended."""
    read: list[JSON] = []

    async def final() -> bool:
        read[:] = [await wire.get_task(task_id)]
        return read[0]["status"]["state"] in _FINAL

    await wait_until(final, what=f"round {round_}: the task to end")
    return read[0]


@pytest.mark.parametrize("racer", sorted(_RACERS))
async def test_a_rejection_or_cancel_racing_the_payment_leaves_consistent_records(
    merchant: RunningMerchant, chain: DevChain, new_payer: Callable[..., str], racer: str
) -> None:
    outcomes: set[str] = set()
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        for round_ in range(ROUNDS):
            payer_key = new_payer()
            payer = Account.from_key(payer_key).address
            balance = chain.balance_of(payer)
            task = await offer(wire)
            payment = payment_message(task["id"], sign_payment(payer_key, terms_of(task)))

            answers = await asyncio.gather(
                wire.send(payment), _RACERS[racer](wire, task["id"]), return_exceptions=True
            )

            for answer in answers:
                # A loser is refused with an A2A error, never an internal one (a message meeting its task
                # being closed is a message to a finished task), or answered with the task as it stands.
                assert not isinstance(answer, BaseException) or isinstance(answer, A2ACallError), answer
                assert not isinstance(answer, A2ACallError) or answer.rpc_code != -32603, answer
            stored = await ended(wire, task["id"], round_)
            state = stored["status"]["state"]
            outcomes.add(state)
            row = await offer_row(merchant.database_url, task["id"])
            booked = [e for e in await ledger_entries(merchant.database_url) if e.task_id == task["id"]]
            events = await completed_events(merchant.database_url, task["id"])
            seen = (round_, state, row.state, answers)
            if state == "TASK_STATE_COMPLETED":
                assert row.state is OfferState.PAID and row.booked_at is not None, seen
                assert chain.balance_of(payer) == balance - DEFAULT_PRICE, seen
                assert len(booked) == 1 and events == 1, seen
            else:
                assert state == "TASK_STATE_CANCELED", seen
                assert row.state is OfferState.REJECTED, seen
                assert chain.balance_of(payer) == balance, seen
                assert booked == [] and events == 0, seen
            # What the task says is what every answer said, once the task had ended.
            for answer in answers:
                if (
                    isinstance(answer, dict)
                    and "task" in answer
                    and answer["task"]["status"]["state"] in _FINAL
                ):
                    assert answer["task"]["status"]["state"] == state, seen
                elif isinstance(answer, dict) and answer.get("status", {}).get("state") in _FINAL:
                    assert answer["status"]["state"] == state, seen
    assert outcomes <= {"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"}
