"""The settlement events a round records without a journal entry (`settlement.pending`, `.failed`) name the
AP2 mandates it was paid with (`ap2`), read from the round's use in the same transaction; a round paid
without mandates, or another round of the task, has none. (SQLite and PostgreSQL.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ap2 import MandateUsageStore
from a2a_x402.merchant.payments import OfferState, OfferStore
from a2a_x402.merchant.webhooks import EventType, Outbox

PAYER = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
USE = {"checkout_hash": "c" * 43, "reference": "r" * 43, "open_mandate": "o" * 43}
NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)


def _data(task_id: str) -> dict[str, object]:
    return {
        "taskId": task_id,
        "contextId": "ctx-1",
        "payer": PAYER,
        "payTo": PAYER,
        "asset": PAYER,
        "network": "eip155:84532",
        "amount": "100000",
        "transaction": None,
        "occurredAt": NOW.isoformat(),
    }


async def _taken(store: OfferStore, task_id: str, rounds: int = 1) -> None:
    for _ in range(rounds):
        assert await store.offer(
            task_id=task_id,
            tenant="acme",
            context_id="ctx-1",
            skill="text-stats",
            dialect="v0.3",
            required={"x402Version": 2, "accepts": []},
            request={"messageId": "m-1"},
            checkout_jwt="a.checkout.jwt",  # every round offered in the embedded flow: only a use tells
        )
    assert await store.submit(
        task_id, round_=rounds, payer=PAYER, nonce=task_id, payload={}, payload_hash="h", accepted={}
    )


async def _use(engine: AsyncEngine, task_id: str, round_: int) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            sa.text(
                "INSERT INTO ap2_mandate_usage (open_mandate, total, uses, last_used_at, updated_at) "
                "VALUES (:open_mandate, 10, 1, :now, :now)"
            ),
            {"open_mandate": USE["open_mandate"], "now": NOW},
        )
        await connection.execute(
            sa.text(
                "INSERT INTO ap2_mandate_uses (reference, open_mandate, tenant, task_id, round, "
                "checkout_hash, amount, state, reserved_at) VALUES (:reference, :open_mandate, 'acme', "
                ":task_id, :round, :checkout_hash, 10, 'reserved', :now)"
            ),
            {**USE, "task_id": task_id, "round": round_, "now": NOW},
        )


async def _events(engine: AsyncEngine) -> dict[str, dict[str, object]]:
    async with engine.connect() as connection:
        rows = (await connection.execute(sa.text("SELECT payload FROM webhook_events"))).all()
    bodies = [json.loads(bytes(row.payload)) for row in rows]
    return {body["data"]["taskId"]: body for body in bodies}


@pytest.mark.parametrize("deciding", [False, True], ids=["store", "store-deciding-uses"])
async def test_pending_and_failed_events_name_the_rounds_mandates(
    engine: AsyncEngine, deciding: bool
) -> None:
    # Deciding, the failure releases the round's use in the same transaction: its event still names it.
    usage = MandateUsageStore(engine) if deciding else None
    store = OfferStore(engine, events=Outbox(engine), usage=usage)
    await _taken(store, "with-mandates")
    await _taken(store, "without")
    await _taken(store, "later-round", rounds=2)
    await _use(engine, "with-mandates", 1)
    async with engine.begin() as connection:  # an earlier round's use says nothing of round 2
        await connection.execute(
            sa.text(
                "INSERT INTO ap2_mandate_uses (reference, open_mandate, tenant, task_id, round, "
                "checkout_hash, amount, state, reserved_at) VALUES (:reference, :open_mandate, 'acme', "
                "'later-round', 1, :checkout_hash, 10, 'released', :now)"
            ),
            {**USE, "reference": "x" * 43, "now": NOW},
        )

    for task_id in ("with-mandates", "without", "later-round"):
        event = (EventType.SETTLEMENT_PENDING, _data(task_id))
        assert await store.advance(task_id, OfferState.SETTLING, event=event)
    failed = (EventType.SETTLEMENT_FAILED, {**_data("with-mandates"), "reason": "insufficient_funds"})
    assert await store.advance("with-mandates", OfferState.FAILED, event=failed)
    events = await _events(engine)

    assert events["with-mandates"]["type"] == "settlement.failed"
    assert events["with-mandates"]["data"]["ap2"] == {  # type: ignore[index]
        "checkoutHash": USE["checkout_hash"],
        "paymentRef": USE["reference"],
        "openMandate": USE["open_mandate"],
    }
    async with engine.connect() as connection:
        state = (
            await connection.execute(
                sa.text("SELECT state FROM ap2_mandate_uses WHERE task_id = 'with-mandates'")
            )
        ).scalar_one()
    assert state == ("released" if deciding else "reserved")
    assert "ap2" not in events["without"]["data"]  # type: ignore[operator]
    assert "ap2" not in events["later-round"]["data"]  # type: ignore[operator]
