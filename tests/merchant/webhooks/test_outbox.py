"""The outbox: events commit with their facts, fan out to endpoints, replay in order, redeliver."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import (
    EndpointConfig,
    EventNotFoundError,
    EventType,
    InvalidEventError,
    Outbox,
    WebhookDelivery,
    WebhookEndpoints,
    WebhookEvent,
    generate_secret,
)
from tests.fixtures.servers import base_url_of, bind_loopback
from tests.merchant.ledger.bookings import NETWORK, PAY_TO, PAYER, USDC, booking

from .conftest import SQLITE_ONLY, WorkerFactory, drain

FAILED_DATA: dict[str, Any] = {
    "taskId": "task-9",
    "contextId": "ctx-9",
    "payer": PAYER,
    "payTo": PAY_TO,
    "asset": USDC,
    "network": NETWORK,
    "amount": "2500000",
    "transaction": None,
    "reason": "insufficient_funds",
    "occurredAt": "2026-11-30T12:00:00Z",
}


async def _rows(engine: AsyncEngine, table: sa.FromClause) -> list[sa.Row[Any]]:
    async with engine.connect() as connection:
        return list((await connection.execute(sa.select(table))).all())


async def test_each_ledger_fact_writes_one_event_with_its_sequence(
    ledger: Ledger, outbox: Outbox, endpoints: WebhookEndpoints, engine: AsyncEngine
) -> None:
    await endpoints.sync(
        [
            EndpointConfig("acme", "https://a.example/hook", generate_secret()),
            EndpointConfig("acme", "https://b.example/hook", generate_secret(), ("settlement.reversed",)),
            EndpointConfig("globex", "https://g.example/hook", generate_secret()),
        ]
    )
    entry = await ledger.book_settlement(booking())
    await ledger.book_settlement(
        booking(nonce=entry.nonce, tx_hash=entry.tx_hash)
    )  # idempotent: no new event
    final = await ledger.mark_final(entry.id, confirmations=5)
    reversal = await ledger.reverse_settlement(entry.id)

    events = await outbox.events_since("acme")

    assert [(event.type, event.sequence) for event in events] == [
        ("settlement.completed", entry.sequence),
        ("settlement.finalized", final.sequence),
        ("settlement.reversed", reversal.sequence),
    ]
    bodies = [json.loads(event.payload) for event in events]
    assert [body["id"] for body in bodies] == [event.id for event in events]
    assert bodies[0]["data"]["ledgerEntryId"] == entry.id and bodies[0]["data"]["amount"] == "2500000"
    assert bodies[2]["data"]["reversalEntryId"] == reversal.id
    deliveries = await _rows(engine, WebhookDelivery.__table__)
    # a.example takes every type, b.example only reversals, globex's endpoint nothing of acme's.
    assert len(deliveries) == 4 and {row.status for row in deliveries} == {"pending"}


async def test_an_event_exists_only_if_its_transaction_commits(outbox: Outbox, engine: AsyncEngine) -> None:
    with pytest.raises(RuntimeError, match="payment layer failed"):
        async with engine.begin() as connection:
            await outbox.record_event(connection, "acme", "settlement.failed", FAILED_DATA)
            raise RuntimeError("payment layer failed")  # its own state change fails: the event goes too

    assert await outbox.events_since("acme") == []
    async with engine.begin() as connection:
        recorded = await outbox.record_event(connection, "acme", EventType.SETTLEMENT_FAILED, FAILED_DATA)
    assert recorded.sequence == 1  # the rolled-back event left no gap
    assert await outbox.events_since("acme") == [recorded]


async def test_record_event_accepts_a_session(outbox: Outbox, engine: AsyncEngine) -> None:
    pending = {**FAILED_DATA, "transaction": "0x" + "ab" * 32}
    del pending["reason"]

    async with AsyncSession(engine) as session, session.begin():
        event = await outbox.record_event(session, "acme", "settlement.pending", pending)

    [stored] = await outbox.events_since("acme")
    assert stored == event
    body = json.loads(stored.payload)
    assert body["type"] == "settlement.pending" and body["data"]["tenant"] == "acme"
    assert body["data"]["transaction"] == "0x" + "ab" * 32 and "ledgerEntryId" not in body["data"]


@SQLITE_ONLY
async def test_an_event_of_the_default_tenant_names_it_default(outbox: Outbox, engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await outbox.record_event(connection, "", "settlement.failed", FAILED_DATA)
        await outbox.record_event(connection, "", "settlement.failed", {**FAILED_DATA, "tenant": "default"})

    events = await outbox.events_since("")
    assert [json.loads(event.payload)["data"]["tenant"] for event in events] == ["default", "default"]
    assert {event.tenant for event in events} == {""}  # stored under the id, as ever
    assert await outbox.events_since("default") == []


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("event_type", "data", "message"),
    [
        ("settlement.completed", FAILED_DATA, "come from the ledger"),
        ("payment.settled", FAILED_DATA, "unknown event type"),
        ("settlement.failed", {**FAILED_DATA, "amount": 5}, "data is invalid"),
        ("settlement.failed", {**FAILED_DATA, "amount": "-1"}, "data is invalid"),
        ("settlement.failed", {**FAILED_DATA, "surprise": 1}, "data is invalid"),
        ("settlement.failed", {k: v for k, v in FAILED_DATA.items() if k != "reason"}, "data is invalid"),
        ("settlement.failed", {**FAILED_DATA, "tenant": "globex"}, "differs"),
    ],
)
async def test_record_event_refuses_what_its_schema_refuses(
    outbox: Outbox, engine: AsyncEngine, event_type: str, data: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidEventError, match=message):
        async with engine.begin() as connection:
            await outbox.record_event(connection, "acme", event_type, data)
    assert await outbox.events_since("acme") == []


async def test_replay_pages_by_sequence_and_is_per_tenant(ledger: Ledger, outbox: Outbox) -> None:
    for tenant in ("acme", "globex", "acme", "acme", "globex"):
        await ledger.book_settlement(booking(tenant=tenant))

    first_page = await outbox.events_since("acme", limit=2)
    second_page = await outbox.events_since("acme", since_sequence=first_page[-1].sequence, limit=2)

    assert [event.sequence for event in first_page] == [1, 3]
    assert [event.sequence for event in second_page] == [4]
    assert [event.sequence for event in await outbox.events_since("globex")] == [2, 5]
    assert all(event.tenant == "acme" for event in first_page + second_page)


async def test_events_at_finds_a_settlements_events_by_their_ledger_sequences(
    ledger: Ledger, outbox: Outbox
) -> None:
    entry = await ledger.book_settlement(booking())
    await ledger.book_settlement(booking())
    final = await ledger.mark_final(entry.id, confirmations=1)
    await ledger.book_settlement(booking(tenant="globex"))

    events = await outbox.events_at("acme", [final.sequence, entry.sequence, entry.sequence])

    assert [(event.type, event.sequence) for event in events] == [
        ("settlement.completed", entry.sequence),
        ("settlement.finalized", final.sequence),
    ]
    assert await outbox.events_at("globex", [entry.sequence, final.sequence]) == []
    assert await outbox.events_at("acme", []) == []


async def test_deliveries_and_their_log_narrowed_to_some_events(
    ledger: Ledger, outbox: Outbox, endpoints: WebhookEndpoints, make_worker: WorkerFactory
) -> None:
    closed = bind_loopback()  # bound and never listening: every attempt is refused
    url = base_url_of(closed) + "/hook"
    await endpoints.sync([EndpointConfig("acme", url, generate_secret())])
    for _ in range(3):
        await ledger.book_settlement(booking())
    first, _, third = await outbox.events_since("acme")
    worker = make_worker()

    async def each_tried() -> bool:
        return len({entry.event_id for entry in await outbox.delivery_log("acme")}) == 3

    await drain(worker, each_tried)
    closed.close()
    chosen = {first.id, third.id}

    states = await outbox.deliveries("acme", event_ids=chosen)
    log = await outbox.delivery_log("acme", event_ids=chosen)

    assert [state.event_id for state in states] == [third.id, first.id]  # newest event first
    assert {entry.event_id for entry in log} == chosen
    assert all(entry.outcome == "retry" and entry.url == url for entry in log)
    assert await outbox.deliveries("globex", event_ids=chosen) == []
    assert await outbox.delivery_log("globex", event_ids=chosen) == []


async def test_redeliver_starts_a_new_round_for_every_active_endpoint(
    ledger: Ledger, outbox: Outbox, endpoints: WebhookEndpoints, engine: AsyncEngine
) -> None:
    await ledger.book_settlement(booking())  # before any endpoint exists: no delivery
    [event] = await outbox.events_since("acme")
    await endpoints.sync([EndpointConfig("acme", "https://a.example/hook", generate_secret())])
    deliveries = WebhookDelivery.__table__
    assert await _rows(engine, deliveries) == []

    assert await outbox.redeliver("acme", event.id) == 1
    in_flight_token = uuid.uuid4().hex
    async with engine.begin() as connection:  # as if a worker were sending its third attempt right now
        await connection.execute(sa.update(WebhookDelivery).values(attempts=3, lease_token=in_flight_token))
    assert await outbox.redeliver("acme", event.id) == 1

    [row] = await _rows(engine, deliveries)
    # A new round, and the in-flight attempt's outcome can no longer overwrite the state.
    assert (row.status, row.attempts, row.round_start, row.lease_token) == ("pending", 3, 3, None)
    states = await outbox.deliveries("acme")
    assert [(state.event_id, state.status, state.url) for state in states] == [
        (event.id, "pending", "https://a.example/hook")
    ]
    with pytest.raises(EventNotFoundError):
        await outbox.redeliver("globex", event.id)  # another tenant's event does not exist for it
    with pytest.raises(EventNotFoundError):
        await outbox.get_event("acme", "evt_missing")


async def test_event_bodies_are_stored_once_in_wire_order(
    ledger: Ledger, outbox: Outbox, engine: AsyncEngine
) -> None:
    await ledger.book_settlement(booking(settled_at=datetime(2026, 11, 30, 12, tzinfo=UTC)))
    [event] = await outbox.events_since("acme")

    [row] = await _rows(engine, WebhookEvent.__table__)

    assert bytes(row.payload) == event.payload
    body = json.loads(event.payload)
    assert body["data"]["settledAt"] == "2026-11-30T12:00:00Z"
    assert list(body) == ["id", "type", "timestamp", "sequence", "data"]
