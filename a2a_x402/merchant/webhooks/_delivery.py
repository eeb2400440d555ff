"""Delivery workers: claim due deliveries, POST them signed, record every attempt, retry on a schedule.

A pass is three steps, and only the first and last touch the database, each in a short transaction:

1. Claim: one UPDATE marks up to `batch_size` due deliveries as leased (`lease_until`, a fresh
   `lease_token`, `attempts + 1`). On PostgreSQL the rows are picked with `FOR UPDATE SKIP LOCKED`, so
   workers in several replicas never claim the same row; on SQLite the single writer makes the UPDATE
   atomic (one process).
2. Send, outside any transaction and at once: the stored body byte for byte, `webhook-id` = the event id
   on every attempt, a fresh `webhook-timestamp` and one `v1,` signature per active secret; one 15 s
   deadline for the whole attempt (DNS included), no redirects, the response body is never read. The
   lease is longer than that deadline, so no other worker can claim a delivery while it is being sent.
3. Record: the attempt goes to the log, and the delivery's new state is written only if this worker still
   holds the lease (same token).

Outcomes: 2xx is delivered. 410 disables the endpoint and fails the delivery. Anything else (3xx, 4xx,
5xx, timeouts, connection errors, a refused target) is retried after the next delay of `RETRY_SCHEDULE_S`
(±10 % jitter), or after `Retry-After` on 429/503 if that is longer; when the schedule is exhausted the
delivery is failed. A worker that dies mid-attempt loses nothing: its lease expires and another worker
claims the delivery again (that claim counts as an attempt).

`run` keeps up to `batch_size` sends in flight and claims more as each one ends, rather than waiting for
a whole batch: a slow endpoint holds only its own slots, and at most `endpoint_concurrency` of them, so
it never delays other endpoints' deliveries. A claim ranks only the earliest due deliveries (a few times
`batch_size`), so its cost does not grow with the backlog; endpoints that are full are left out before
that cap, and a claim that fills an endpoint is followed by another, so one endpoint's backlog cannot
hide the others'.

Guarantees: at least once, with the same `webhook-id`, so receivers deduplicate on it. Order is not kept,
even per endpoint (retries and parallel sends reorder events); each body carries `sequence`, the commit
order of the facts, for receivers that need it, and the replay endpoint lists events in that order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import httpx
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import write_transaction

from ._endpoints import disable_endpoint, endpoint_from_row
from ._ids import new_id
from ._models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from ._retry import RetryPolicy
from ._sender import REQUEST_TIMEOUT_S, SendResult, send_signed

__all__ = ["DRAIN_S", "LEASE_MARGIN_S", "REQUEST_TIMEOUT_S", "DeliveryWorker"]

logger = logging.getLogger(__name__)

LEASE_MARGIN_S = 0.5
"""How much longer than the attempt deadline a claim lease must be: room for the claim's own transaction
before the send starts, so the lease always outlasts the send."""

_LEASE_S = 60.0
DRAIN_S = 5.0
"""How long `DeliveryWorker.run` lets the sends in flight at shutdown finish before it stops them."""
_BATCH_SIZE = 20
_ENDPOINT_CONCURRENCY = 5
_CANDIDATES_PER_SLOT = 4
"""A claim ranks at most this many times `batch_size` due deliveries, the earliest due, so that its cost
does not grow with the backlog."""
_GONE = 410

_deliveries = cast(sa.Table, WebhookDelivery.__table__)
_events = cast(sa.Table, WebhookEvent.__table__)
_endpoints = cast(sa.Table, WebhookEndpoint.__table__)
_attempts = cast(sa.Table, WebhookAttempt.__table__)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class _Claim:
    delivery_id: str
    token: str
    attempt: int
    failures_before: int
    event_id: str
    payload: bytes
    endpoint_id: str
    url: str
    secrets: tuple[str, ...] = field(repr=False)


def _default_worker_id() -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(3)}"


class DeliveryWorker:
    """Delivers the outbox in `engine` with `client`; run one or more per process, in any number of replicas
    sharing one PostgreSQL (one process for SQLite).

    Args:
        engine: the merchant database.
        client: the HTTP client (inject a transport to test); its own timeout is overridden per request.
        retry: the retry schedule (default `RETRY_SCHEDULE_S`; tests pass a short one).
        allow_private_targets: let deliveries reach private, loopback and link-local addresses
            (development and tests only).
        lease_s: how long a claim lasts; at least `timeout_s` + `LEASE_MARGIN_S`, so that no other worker
            can claim a delivery while this one is sending it.
        batch_size: deliveries claimed per pass (`run_once`), and the most in flight at once (`run`).
        endpoint_concurrency: the most deliveries to one endpoint that `run` has in flight at once.
        timeout_s: deadline of one attempt, DNS lookup included.
        worker_id: recorded with each attempt (default host:pid:random).
        on_outcome: told each attempt's outcome (`delivered`, `retry`, `failed`, `disabled`), to count it.

    Raises:
        ValueError: `lease_s` is shorter than `timeout_s` + `LEASE_MARGIN_S`, or a count is below 1.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        client: httpx.AsyncClient,
        *,
        retry: RetryPolicy | None = None,
        allow_private_targets: bool = False,
        lease_s: float = _LEASE_S,
        batch_size: int = _BATCH_SIZE,
        endpoint_concurrency: int = _ENDPOINT_CONCURRENCY,
        timeout_s: float = REQUEST_TIMEOUT_S,
        worker_id: str | None = None,
        on_outcome: Callable[[str], None] | None = None,
    ) -> None:
        if lease_s < timeout_s + LEASE_MARGIN_S:
            raise ValueError(
                f"lease_s ({lease_s:g}) must be at least timeout_s ({timeout_s:g}) + {LEASE_MARGIN_S:g}"
            )
        if batch_size < 1 or endpoint_concurrency < 1:
            raise ValueError("batch_size and endpoint_concurrency must be at least 1")
        self._engine = engine
        self._client = client
        self._retry = retry or RetryPolicy()
        self._allow_private = allow_private_targets
        self._lease = timedelta(seconds=lease_s)
        self._batch_size = batch_size
        self._endpoint_concurrency = endpoint_concurrency
        self._timeout_s = timeout_s
        self.worker_id = worker_id or _default_worker_id()
        self._on_outcome = on_outcome

    async def run_once(self) -> int:
        """Claim the due deliveries (up to the batch size), send them concurrently, record the outcomes.

        Returns how many were claimed.
        """
        claims: list[_Claim] = []
        claimed: Counter[str] = Counter()
        while len(claims) < self._batch_size:
            more = await self._claim(self._batch_size - len(claims), in_flight=claimed)
            claims += more
            claimed.update(claim.endpoint_id for claim in more)
            if not self._filled_an_endpoint(more, claimed):
                break
        await asyncio.gather(*(self._deliver(claim) for claim in claims))
        return len(claims)

    async def run(
        self, stop: asyncio.Event, *, poll_interval_s: float = 1.0, drain_s: float = DRAIN_S
    ) -> None:
        """Deliver until `stop` is set: keep up to `batch_size` sends in flight, claiming more as each one
        ends, and poll every `poll_interval_s` when there is nothing due. Sends in flight when `stop` is
        set get `drain_s` to finish and be recorded; the rest are stopped and sent again once their
        lease expires (a receiver may then see a delivery twice, as the webhook contract allows), so a
        slow receiver cannot hold up the server's shutdown for a whole attempt's deadline.

        Database errors (a restart, a failover) are logged and retried after the poll interval; the
        leases of whatever was in flight expire and the deliveries are claimed again.
        """
        in_flight: dict[asyncio.Task[None], str] = {}
        finished = asyncio.Event()

        def done(task: asyncio.Task[None]) -> None:
            del in_flight[task]
            finished.set()

        try:
            while not stop.is_set():
                finished.clear()
                free = self._batch_size - len(in_flight)
                claims: list[_Claim] = []
                if free > 0:
                    try:
                        claims = await self._claim(free, in_flight=Counter(in_flight.values()))
                    except (SQLAlchemyError, OSError):
                        logger.exception("webhook claim failed; retrying in %.1f s", poll_interval_s)
                for claim in claims:
                    task = asyncio.create_task(self._deliver_logged(claim), name=claim.delivery_id)
                    in_flight[task] = claim.endpoint_id
                    task.add_done_callback(done)
                if free > 0 and (
                    len(claims) == free or self._filled_an_endpoint(claims, Counter(in_flight.values()))
                ):
                    continue  # more may be due
                await _first_of(stop, finished, timeout_s=poll_interval_s)
        finally:
            await _drain(set(in_flight), drain_s)

    async def _deliver_logged(self, claim: _Claim) -> None:
        try:
            await self._deliver(claim)
        except (SQLAlchemyError, OSError):
            # The outcome is lost, not the delivery: its lease expires and it is claimed again.
            logger.exception("recording webhook %s to endpoint %s failed", claim.event_id, claim.endpoint_id)

    def _filled_an_endpoint(self, claims: list[_Claim], in_flight: Counter[str]) -> bool:
        # A claim only ranks the earliest due deliveries, so one endpoint's backlog can hide the others';
        # once that endpoint is full the next claim leaves it out and reaches them.
        return any(in_flight[claim.endpoint_id] >= self._endpoint_concurrency for claim in claims)

    async def _claim(self, limit: int, *, in_flight: Counter[str]) -> list[_Claim]:
        now = _now()
        token = secrets.token_hex(16)
        due_now = sa.and_(
            _deliveries.c.status == "pending",
            _deliveries.c.next_attempt_at <= now,
            sa.or_(_deliveries.c.lease_until.is_(None), _deliveries.c.lease_until < now),
            _endpoints.c.status == "active",
        )
        # Endpoints already at `endpoint_concurrency` in this worker are left out before the candidates are
        # capped, so that their backlog cannot fill the candidates.
        full = [endpoint for endpoint, count in in_flight.items() if count >= self._endpoint_concurrency]
        if full:
            due_now = sa.and_(due_now, _deliveries.c.endpoint_id.not_in(full))
        # Only the earliest due are ranked, so a claim costs the same whatever the backlog.
        candidates = (
            sa.select(_deliveries.c.id, _deliveries.c.endpoint_id, _deliveries.c.next_attempt_at)
            .join(_endpoints, _endpoints.c.id == _deliveries.c.endpoint_id)
            .where(due_now)
            .order_by(_deliveries.c.next_attempt_at, _deliveries.c.id)
            .limit(self._batch_size * _CANDIDATES_PER_SLOT)
            .subquery()
        )
        # Each endpoint gets what `endpoint_concurrency` leaves beside this worker's sends in flight to it,
        # so that one endpoint's backlog cannot take every slot. The ranking is a subquery of its own
        # because PostgreSQL refuses FOR UPDATE next to a window function.
        room: sa.ColumnElement[int] = sa.literal(self._endpoint_concurrency)
        if in_flight:
            room = sa.case(
                {endpoint: self._endpoint_concurrency - count for endpoint, count in in_flight.items()},
                value=candidates.c.endpoint_id,
                else_=self._endpoint_concurrency,
            )
        ranked = sa.select(
            candidates.c.id,
            sa.func.row_number()
            .over(
                partition_by=candidates.c.endpoint_id,
                order_by=(candidates.c.next_attempt_at, candidates.c.id),
            )
            .label("rank"),
            room.label("room"),
        ).subquery()
        first_per_endpoint = sa.select(ranked.c.id).where(ranked.c.rank <= ranked.c.room)
        due = (
            sa.select(_deliveries.c.id)
            .join(_endpoints, _endpoints.c.id == _deliveries.c.endpoint_id)
            .where(due_now, _deliveries.c.id.in_(first_per_endpoint))
            .order_by(_deliveries.c.next_attempt_at, _deliveries.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True, of=_deliveries)
        )
        async with write_transaction(self._engine) as connection:
            claimed = (
                (
                    await connection.execute(
                        sa.update(_deliveries)
                        .where(_deliveries.c.id.in_(due.scalar_subquery()))
                        .values(
                            attempts=_deliveries.c.attempts + 1,
                            lease_until=now + self._lease,
                            lease_token=token,
                            updated_at=now,
                        )
                        .returning(_deliveries.c.id)
                    )
                )
                .scalars()
                .all()
            )
            if not claimed:
                return []
            rows = (
                await connection.execute(
                    sa.select(
                        _deliveries.c.id.label("delivery_id"),
                        _deliveries.c.event_id,
                        _deliveries.c.attempts.label("claimed_attempts"),
                        _deliveries.c.round_start,
                        _events.c.payload,
                        _endpoints,
                    )
                    .join(_events, _events.c.id == _deliveries.c.event_id)
                    .join(_endpoints, _endpoints.c.id == _deliveries.c.endpoint_id)
                    .where(_deliveries.c.id.in_(claimed))
                )
            ).all()
        return [self._to_claim(row, token, now) for row in rows]

    @staticmethod
    def _to_claim(row: sa.Row[Any], token: str, now: datetime) -> _Claim:
        endpoint = endpoint_from_row(row)
        return _Claim(
            delivery_id=row.delivery_id,
            token=token,
            attempt=row.claimed_attempts,
            failures_before=row.claimed_attempts - 1 - row.round_start,
            event_id=row.event_id,
            payload=bytes(row.payload),
            endpoint_id=endpoint.id,
            url=endpoint.url,
            secrets=endpoint.signing_secrets(now),
        )

    async def _deliver(self, claim: _Claim) -> None:
        started_at = _now()
        response = await send_signed(
            self._client,
            claim.url,
            claim.event_id,
            claim.payload,
            claim.secrets,
            allow_private=self._allow_private,
            timeout_s=self._timeout_s,
        )
        await self._record(claim, started_at, response)

    async def _record(self, claim: _Claim, started_at: datetime, response: SendResult) -> None:
        now = _now()
        status = response.status_code
        next_attempt_at: datetime | None = None
        changes: dict[str, Any] = {"last_status_code": status, "last_error": response.error}
        if status is not None and 200 <= status < 300:
            outcome = "delivered"
            changes.update(status="delivered", delivered_at=now)
        elif status == _GONE:
            outcome = "disabled"
            changes.update(status="failed")
        else:
            delay = self._retry.delay_after(claim.failures_before + 1, response.retry_after_s)
            if delay is None:
                outcome = "failed"
                changes.update(status="failed")
            else:
                outcome = "retry"
                next_attempt_at = now + timedelta(seconds=delay)
        changes.update(next_attempt_at=next_attempt_at, lease_until=None, lease_token=None, updated_at=now)
        async with write_transaction(self._engine) as connection:
            await connection.execute(
                sa.insert(_attempts).values(
                    id=new_id("att"),
                    delivery_id=claim.delivery_id,
                    attempt=claim.attempt,
                    worker=self.worker_id[:64],
                    started_at=started_at,
                    latency_ms=response.latency_ms,
                    status_code=status,
                    error=response.error,
                    outcome=outcome,
                    next_attempt_at=next_attempt_at,
                )
            )
            await connection.execute(
                sa.update(_deliveries)
                .where(_deliveries.c.id == claim.delivery_id, _deliveries.c.lease_token == claim.token)
                .values(**changes)
            )
            if outcome == "disabled":
                await disable_endpoint(connection, claim.endpoint_id, "gone: the receiver answered 410")
        if self._on_outcome is not None:
            self._on_outcome(outcome)
        logger.info(
            "webhook %s to endpoint %s attempt %d: %s (status %s, %d ms)",
            claim.event_id,
            claim.endpoint_id,
            claim.attempt,
            outcome,
            status,
            response.latency_ms,
        )


async def _drain(sending: set[asyncio.Task[None]], drain_s: float) -> None:
    if not sending:
        return
    _, late = await asyncio.wait(sending, timeout=drain_s)
    if late:
        logger.warning(
            "shutdown: %d webhook deliveries still sending after %g s were stopped; they are sent again "
            "when their lease expires",
            len(late),
            drain_s,
        )
        for task in late:
            task.cancel()
        await asyncio.wait(late)


async def _first_of(stop: asyncio.Event, finished: asyncio.Event, *, timeout_s: float) -> None:
    waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(finished.wait())]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
