"""The transactional outbox: events written in the transaction of the fact they report, then fanned out.

`publish` (the ledger's event sink) and `record_event` (for the payment layer's `settlement.pending` and
`settlement.failed`, which have no ledger entry) both run on the caller's connection, inside the caller's
transaction: the event exists if and only if the fact does. Each event takes a ledger sequence number,
serializes its body once, and gets one pending delivery per active endpoint of its tenant subscribed to
its type. Delivery workers (`_delivery.py`) take it from there.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from a2a_x402.merchant.ledger import LedgerFact, allocate_sequence
from a2a_x402.merchant.tenants import tenant_name
from a2a_x402.storage import write_transaction

from ._endpoints import active_endpoints, active_endpoints_after, subscribed
from ._errors import EventNotFoundError, InvalidEventError
from ._events import EVENT_DATA_MODELS, EventModel, EventType, fact_event, serialize_event
from ._ids import new_id
from ._models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent

__all__ = ["DeliveryLogEntry", "DeliveryState", "Outbox", "StoredEvent"]

_events = cast(sa.Table, WebhookEvent.__table__)
_deliveries = cast(sa.Table, WebhookDelivery.__table__)
_endpoints = cast(sa.Table, WebhookEndpoint.__table__)
_attempts = cast(sa.Table, WebhookAttempt.__table__)

# Types the payment layer records itself; the others are only ever derived from ledger facts, so that a
# `settlement.completed` always has its journal entry.
_RECORDABLE = frozenset({EventType.SETTLEMENT_PENDING, EventType.SETTLEMENT_FAILED})
_REPLAY_LIMIT_MAX = 1000


def _now() -> datetime:
    return datetime.now(UTC)


# Built once, its values given per call (an event is enqueued with every booking).
_INSERT_EVENT = sa.insert(_events)
# On PostgreSQL the event's insert and the read of its endpoints are one statement: an event is written
# under the ledger sequence's lock, which every booking waits for, and each round trip under it waits for
# the event loop to send the next. The read still starts after the sequence was taken, so it sees every
# endpoint committed before that.
_INSERT_EVENT_READ_ENDPOINTS = active_endpoints_after(
    sa.insert(_events)
    .values({column.name: sa.bindparam(f"ev_{column.name}", type_=column.type) for column in _events.c})
    .cte("new_event")
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEvent:
    """An event in the outbox; `payload` is the exact body every delivery sends."""

    id: str
    tenant: str
    type: str
    sequence: int
    payload: bytes
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryState:
    """Where the delivery of one event to one endpoint stands."""

    id: str
    event_id: str
    event_type: str
    sequence: int
    endpoint_id: str
    url: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    delivered_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryLogEntry:
    """One attempt from the delivery log."""

    id: str
    event_id: str
    event_type: str
    endpoint_id: str
    url: str
    attempt: int
    worker: str
    started_at: datetime
    latency_ms: int | None
    status_code: int | None
    error: str | None
    outcome: str
    next_attempt_at: datetime | None


def _stored_event(row: sa.Row[Any]) -> StoredEvent:
    return StoredEvent(
        id=row.id,
        tenant=row.tenant,
        type=row.type,
        sequence=row.sequence,
        payload=bytes(row.payload),
        created_at=row.created_at,
    )


class Outbox:
    """The outbox in `engine`: writes events in callers' transactions, answers replay and redelivery."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def publish(self, connection: AsyncConnection, fact: LedgerFact) -> None:
        """Write the event announcing a ledger fact (the ledger's `LedgerEventSink`); no commit."""
        event_type, data = fact_event(fact)
        await self._enqueue(connection, fact.tenant, event_type, fact.sequence, data)

    async def record_event(
        self,
        connection: AsyncConnection | AsyncSession,
        tenant: str,
        event_type: EventType | str,
        data: Mapping[str, Any],
    ) -> StoredEvent:
        """Write a `settlement.pending` or `settlement.failed` event in the caller's transaction (no commit).

        `data` is the event's `data` object in its wire form (camelCase keys, see the type's JSON Schema);
        `tenant` is filled in. The event takes the next ledger sequence number, which holds the sequence
        lock until the caller's transaction ends: keep that transaction short.

        Raises:
            InvalidEventError: the type is not one of those two, or `data` does not match its schema.
        """
        try:
            kind = EventType(event_type)
        except ValueError as exc:
            raise InvalidEventError(f"unknown event type {event_type!r}") from exc
        if kind not in _RECORDABLE:
            raise InvalidEventError(f"{kind.value} events come from the ledger, not record_event")
        if data.get("tenant", tenant) not in (tenant, tenant_name(tenant)):
            raise InvalidEventError("data.tenant differs from the event's tenant")
        try:
            model = EVENT_DATA_MODELS[kind].model_validate({**data, "tenant": tenant})
        except ValidationError as exc:
            raise InvalidEventError(f"{kind.value} data is invalid: {exc}") from exc
        if isinstance(connection, AsyncSession):
            connection = await connection.connection()
        sequence = await allocate_sequence(connection)
        return await self._enqueue(connection, tenant, kind, sequence, model)

    async def _enqueue(
        self, connection: AsyncConnection, tenant: str, event_type: EventType, sequence: int, data: EventModel
    ) -> StoredEvent:
        now = _now()
        event_id = new_id("evt")
        event = StoredEvent(
            id=event_id,
            tenant=tenant,
            type=event_type.value,
            sequence=sequence,
            payload=serialize_event(
                event_type, event_id=event_id, timestamp=now, sequence=sequence, data=data
            ),
            created_at=now,
        )
        if connection.dialect.name == "postgresql":
            values = {f"ev_{name}": value for name, value in _fields(event).items()}
            rows = await connection.execute(_INSERT_EVENT_READ_ENDPOINTS, {**values, "_tenant": tenant})
            endpoints = subscribed(rows, event_type.value)
        else:
            await connection.execute(_INSERT_EVENT, _fields(event))
            endpoints = await active_endpoints(connection, tenant, event_type.value)
        if endpoints:
            await connection.execute(
                sa.insert(_deliveries),
                [_new_delivery(event.id, endpoint.id, now) for endpoint in endpoints],
            )
        return event

    async def get_event(self, tenant: str, event_id: str) -> StoredEvent:
        """The tenant's event `event_id`.

        Raises:
            EventNotFoundError: the tenant has no such event.
        """
        async with self._engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(_events).where(_events.c.id == event_id, _events.c.tenant == tenant)
                )
            ).one_or_none()
        if row is None:
            raise EventNotFoundError(event_id)
        return _stored_event(row)

    async def events_since(self, tenant: str, since_sequence: int = 0, limit: int = 100) -> list[StoredEvent]:
        """The tenant's events with a sequence above `since_sequence`, oldest first, at most `limit`.

        Sequence numbers are assigned in commit order, so paging with the last sequence seen never skips
        an event that commits later.
        """
        limit = max(1, min(limit, _REPLAY_LIMIT_MAX))
        statement = (
            sa.select(_events)
            .where(_events.c.tenant == tenant, _events.c.sequence > since_sequence)
            .order_by(_events.c.sequence)
            .limit(limit)
        )
        async with self._engine.connect() as connection:
            return [_stored_event(row) for row in await connection.execute(statement)]

    async def events_at(self, tenant: str, sequences: Collection[int]) -> list[StoredEvent]:
        """The tenant's events with one of these ledger sequence numbers, oldest first.

        A ledger fact and the event announcing it share a sequence number, so this finds the events of a
        settlement from its entry, finalization and reversal.
        """
        if not sequences:
            return []
        statement = (
            sa.select(_events)
            .where(_events.c.tenant == tenant, _events.c.sequence.in_(sorted(set(sequences))))
            .order_by(_events.c.sequence)
        )
        async with self._engine.connect() as connection:
            return [_stored_event(row) for row in await connection.execute(statement)]

    async def redeliver(self, tenant: str, event_id: str) -> int:
        """Send the tenant's event again to every active endpoint subscribed to it; returns how many.

        Each delivery starts a new round of the retry schedule, delivered or not before. One in flight
        right now loses its lease token, so its outcome only goes to the log and it is sent once more
        after its lease ends.

        Raises:
            EventNotFoundError: the tenant has no such event.
        """
        event = await self.get_event(tenant, event_id)
        now = _now()
        async with write_transaction(self._engine) as connection:
            endpoints = await active_endpoints(connection, tenant, event.type)
            if not endpoints:
                return 0
            insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
            for endpoint in endpoints:
                await connection.execute(
                    insert(_deliveries)
                    .values(**_new_delivery(event.id, endpoint.id, now))
                    .on_conflict_do_nothing(index_elements=["event_id", "endpoint_id"])
                )
            await connection.execute(
                sa.update(_deliveries)
                .where(
                    _deliveries.c.event_id == event.id,
                    _deliveries.c.endpoint_id.in_([endpoint.id for endpoint in endpoints]),
                )
                .values(
                    status="pending",
                    round_start=_deliveries.c.attempts,
                    next_attempt_at=now,
                    lease_token=None,
                    updated_at=now,
                )
            )
        return len(endpoints)

    async def deliveries(
        self,
        tenant: str,
        *,
        limit: int = 50,
        status: str | None = None,
        event_ids: Collection[str] | None = None,
    ) -> list[DeliveryState]:
        """The tenant's most recent deliveries (newest event first), optionally only those in `status` or
        only those of `event_ids`."""
        statement = (
            sa.select(
                _deliveries,
                _events.c.type.label("event_type"),
                _events.c.sequence,
                _endpoints.c.url,
            )
            .join(_events, _events.c.id == _deliveries.c.event_id)
            .join(_endpoints, _endpoints.c.id == _deliveries.c.endpoint_id)
            .where(_events.c.tenant == tenant)
            .order_by(_events.c.sequence.desc(), _deliveries.c.id)
            .limit(limit)
        )
        if status is not None:
            statement = statement.where(_deliveries.c.status == status)
        if event_ids is not None:
            statement = statement.where(_deliveries.c.event_id.in_(sorted(set(event_ids))))
        async with self._engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [
            DeliveryState(
                id=row.id,
                event_id=row.event_id,
                event_type=row.event_type,
                sequence=row.sequence,
                endpoint_id=row.endpoint_id,
                url=row.url,
                status=row.status,
                attempts=row.attempts,
                next_attempt_at=row.next_attempt_at,
                last_status_code=row.last_status_code,
                last_error=row.last_error,
                delivered_at=row.delivered_at,
            )
            for row in rows
        ]

    async def delivery_log(
        self,
        tenant: str,
        *,
        limit: int = 50,
        event_id: str | None = None,
        event_ids: Collection[str] | None = None,
    ) -> list[DeliveryLogEntry]:
        """The tenant's most recent delivery attempts, newest first (only `event_id`'s, or only those of
        `event_ids`, when given)."""
        statement = (
            sa.select(
                _attempts,
                _deliveries.c.event_id,
                _deliveries.c.endpoint_id,
                _events.c.type.label("event_type"),
                _endpoints.c.url,
            )
            .join(_deliveries, _deliveries.c.id == _attempts.c.delivery_id)
            .join(_events, _events.c.id == _deliveries.c.event_id)
            .join(_endpoints, _endpoints.c.id == _deliveries.c.endpoint_id)
            .where(_events.c.tenant == tenant)
            .order_by(_attempts.c.started_at.desc(), _attempts.c.id.desc())
            .limit(limit)
        )
        if event_id is not None:
            statement = statement.where(_deliveries.c.event_id == event_id)
        if event_ids is not None:
            statement = statement.where(_deliveries.c.event_id.in_(sorted(set(event_ids))))
        async with self._engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [
            DeliveryLogEntry(
                id=row.id,
                event_id=row.event_id,
                event_type=row.event_type,
                endpoint_id=row.endpoint_id,
                url=row.url,
                attempt=row.attempt,
                worker=row.worker,
                started_at=row.started_at,
                latency_ms=row.latency_ms,
                status_code=row.status_code,
                error=row.error,
                outcome=row.outcome,
                next_attempt_at=row.next_attempt_at,
            )
            for row in rows
        ]


def _fields(event: StoredEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "tenant": event.tenant,
        "type": event.type,
        "sequence": event.sequence,
        "payload": event.payload,
        "created_at": event.created_at,
    }


def _new_delivery(event_id: str, endpoint_id: str, now: datetime) -> dict[str, Any]:
    return {
        "id": new_id("msg"),
        "event_id": event_id,
        "endpoint_id": endpoint_id,
        "status": "pending",
        "attempts": 0,
        "round_start": 0,
        "next_attempt_at": now,
        "created_at": now,
        "updated_at": now,
    }
