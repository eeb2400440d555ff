"""The reconciler's differences as records (`reconcile_differences`, migration m0012), with a lifecycle.

A difference is one row per (kind, key): the key names what it is about (a payment's payer and nonce, a
booking's entry id). A pass that sees it again moves `last_seen`; it stays `open` until the chain
resolves it (`resolved`, with the reason in `note`) or an operator acknowledges it (`acknowledged`) or
books it to a tenant (`booked`). One the chain resolved that a later pass sees again is opened again;
one an operator closed stays closed (it is still seen: `last_seen` moves). `reconcile_chain` holds the
genesis block hash the last pass read, per chain id.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write

from ._kinds import CHAIN_WIDE_KINDS

__all__ = [
    "MAX_NOTE_CHARS",
    "DifferenceNotOpenError",
    "DifferenceState",
    "DifferenceStore",
    "Sighting",
    "StoredDifference",
]

logger = logging.getLogger("a2a_x402.merchant.differences")

_METADATA = sa.MetaData()
_DIFFERENCES = sa.Table(
    "reconcile_differences",
    _METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.String(64), nullable=True),
    sa.Column("pay_to", sa.String(42), nullable=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("key", sa.String(200), nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("facts", sa.Text, nullable=True),
    sa.Column("first_seen", UtcDateTime(), nullable=False),
    sa.Column("last_seen", UtcDateTime(), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("note", sa.Text, nullable=True),
    sa.Column("resolved_at", UtcDateTime(), nullable=True),
    sa.Column("resolved_by", sa.String(64), nullable=True),
)
_CHAIN = sa.Table(
    "reconcile_chain",
    _METADATA,
    sa.Column("chain_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("genesis_hash", sa.String(66), nullable=False),
    sa.Column("restarted_at", UtcDateTime(), nullable=True),
)
# A log line quotes at most this much of a difference's text: one line each, never kilobytes.
_LOGGED_CHARS = 400
MAX_NOTE_CHARS = 500
"""The longest note an operator may give (a longer one is refused, nothing changed)."""


class DifferenceState(StrEnum):
    """Where a difference is in its life."""

    OPEN = "open"
    RESOLVED = "resolved"  # by the chain: the reason is the note
    ACKNOWLEDGED = "acknowledged"
    BOOKED = "booked"


class DifferenceNotOpenError(Exception):
    """The difference does not exist (for this tenant) or is no longer open."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sighting:
    """A difference as one pass saw it: `facts` are what an automatic check or a booking needs."""

    kind: str
    key: str
    detail: str
    tenant: str | None = None
    pay_to: str | None = None
    facts: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredDifference:
    """A difference as stored."""

    id: int
    kind: str
    key: str
    detail: str
    tenant: str | None
    pay_to: str | None
    facts: dict[str, Any]
    first_seen: datetime
    last_seen: datetime
    state: DifferenceState
    note: str | None
    resolved_at: datetime | None
    resolved_by: str | None

    @property
    def about_chain(self) -> bool:
        """Whether it is about the chain itself (no tenant, no payTo), which every tenant is shown."""
        return self.tenant is None and self.pay_to is None and self.kind in CHAIN_WIDE_KINDS


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _LOGGED_CHARS else line[: _LOGGED_CHARS - 1] + "…"


def _stored(row: Any) -> StoredDifference:
    return StoredDifference(
        id=row.id,
        kind=row.kind,
        key=row.key,
        detail=row.detail,
        tenant=row.tenant,
        pay_to=row.pay_to,
        facts=json.loads(row.facts) if row.facts else {},
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        state=DifferenceState(row.state),
        note=row.note,
        resolved_at=row.resolved_at,
        resolved_by=row.resolved_by,
    )


def _sight(connection: Connection, sighting: Sighting, now: datetime) -> tuple[int, str | None]:
    """Record one sighting; (its id, "opened"/"reopened" or None when nothing but `last_seen` changed)."""
    table = _DIFFERENCES
    row = connection.execute(
        sa.select(table.c.id, table.c.state).where(table.c.kind == sighting.kind, table.c.key == sighting.key)
    ).first()
    if row is None:
        inserted = connection.execute(
            sa.insert(table).values(
                kind=sighting.kind,
                key=sighting.key,
                detail=sighting.detail,
                tenant=sighting.tenant,
                pay_to=sighting.pay_to,
                facts=json.dumps(sighting.facts, sort_keys=True) if sighting.facts else None,
                first_seen=now,
                last_seen=now,
                state=DifferenceState.OPEN.value,
            )
        )
        key = inserted.inserted_primary_key
        assert key is not None  # an insert of one row with an autoincrement id
        return int(key[0]), "opened"
    values: dict[str, Any] = {"last_seen": now, "detail": sighting.detail}
    change = None
    if row.state == DifferenceState.RESOLVED.value:
        values.update(state=DifferenceState.OPEN.value, note=None, resolved_at=None, resolved_by=None)
        change = "reopened"
    connection.execute(sa.update(table).where(table.c.id == row.id).values(values))
    return int(row.id), change


class DifferenceStore:
    """Reads and changes the differences in `engine`; every change is logged in one line."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def sighted(self, sightings: Iterable[Sighting], *, now: datetime | None = None) -> list[int]:
        """Record what a pass saw; return the ids of the differences that were opened (or opened again)."""
        when = datetime.now(UTC) if now is None else now
        changed: list[int] = []
        for sighting in sightings:
            sight = partial(_sight, sighting=sighting, now=when)
            try:
                ident, change = await write(self._engine, sight)
            except IntegrityError:  # another replica inserted it first: this sighting only moves last_seen
                ident, change = await write(self._engine, sight)
            if change is not None:
                changed.append(ident)
                logger.warning(
                    "difference %d %s: %s %s: %s",
                    ident,
                    change,
                    sighting.kind,
                    sighting.key,
                    _short(sighting.detail),
                )
        return changed

    async def close(
        self,
        ident: int,
        state: DifferenceState,
        *,
        note: str,
        by: str,
        tenant_or_payee: tuple[str, str] | None = None,
        now: datetime | None = None,
    ) -> StoredDifference:
        """Close the open difference `ident` as `state` with `note`, by `by` ("chain" or an operator).

        `tenant_or_payee` (tenant, its payTo) limits it to a difference about that tenant or its payee.

        Raises:
            DifferenceNotOpenError: no such open difference (for that tenant); nothing changed.
        """
        if state is DifferenceState.OPEN:
            raise ValueError("a difference is closed as resolved, acknowledged or booked")
        when = datetime.now(UTC) if now is None else now
        table = _DIFFERENCES
        condition = sa.and_(table.c.id == ident, table.c.state == DifferenceState.OPEN.value)
        if tenant_or_payee is not None:
            tenant, pay_to = tenant_or_payee
            condition = sa.and_(condition, _concerns(tenant, pay_to))

        def close(connection: Connection) -> int:
            return int(
                connection.execute(
                    sa.update(table)
                    .where(condition)
                    .values(state=state.value, note=note, resolved_at=when, resolved_by=by)
                ).rowcount
            )

        if await write(self._engine, close) != 1:
            raise DifferenceNotOpenError(f"difference {ident}: no such open difference")
        closed = await self.get(ident)
        assert closed is not None  # closed just now, and rows are never deleted
        logger.info(
            "difference %d %s by %s: %s %s: %s", ident, state.value, by, closed.kind, closed.key, _short(note)
        )
        return closed

    async def resolve_all(
        self, kinds: Iterable[str], *, note: str, by: str, now: datetime | None = None
    ) -> int:
        """Resolve every open difference of `kinds` with `note`; return how many (the caller says so: a
        restarted chain in the one line of its own difference, not one line per difference it closed)."""
        when = datetime.now(UTC) if now is None else now
        table = _DIFFERENCES
        chosen = sorted(kinds)

        def close(connection: Connection) -> int:
            return int(
                connection.execute(
                    sa.update(table)
                    .where(table.c.state == DifferenceState.OPEN.value, table.c.kind.in_(chosen))
                    .values(state=DifferenceState.RESOLVED.value, note=note, resolved_at=when, resolved_by=by)
                ).rowcount
            )

        return await write(self._engine, close)

    async def get(self, ident: int) -> StoredDifference | None:
        """The difference `ident`, or None."""
        async with self._engine.connect() as connection:
            row = (
                await connection.execute(sa.select(_DIFFERENCES).where(_DIFFERENCES.c.id == ident))
            ).first()
        return None if row is None else _stored(row)

    async def listed(
        self,
        *,
        states: Sequence[DifferenceState] = (DifferenceState.OPEN,),
        kinds: Sequence[str] | None = None,
        tenant_or_payee: tuple[str, str] | None = None,
        chain_wide: bool = False,
        limit: int = 200,
    ) -> list[StoredDifference]:
        """Differences in `states` (of `kinds`; about `tenant_or_payee`, and with `chain_wide` those about
        the chain itself too, which concern every tenant), oldest first, at most `limit`."""
        query = sa.select(_DIFFERENCES).where(_DIFFERENCES.c.state.in_([s.value for s in states]))
        if kinds is not None:
            query = query.where(_DIFFERENCES.c.kind.in_(list(kinds)))
        if tenant_or_payee is not None:
            about = _concerns(*tenant_or_payee)
            query = query.where(sa.or_(about, _about_chain()) if chain_wide else about)
        query = query.order_by(_DIFFERENCES.c.first_seen, _DIFFERENCES.c.id).limit(limit)
        async with self._engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [_stored(row) for row in rows]

    async def open_counts(self) -> dict[str, int]:
        """How many differences are open, by kind."""
        table = _DIFFERENCES
        query = (
            sa.select(table.c.kind, sa.func.count())
            .where(table.c.state == DifferenceState.OPEN.value)
            .group_by(table.c.kind)
        )
        async with self._engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return {kind: int(count) for kind, count in rows}

    async def genesis(self, chain_id: int) -> tuple[str, datetime | None] | None:
        """The genesis hash the last pass read on `chain_id` and when it last changed, or None."""
        async with self._engine.connect() as connection:
            row = (await connection.execute(sa.select(_CHAIN).where(_CHAIN.c.chain_id == chain_id))).first()
        return None if row is None else (row.genesis_hash, row.restarted_at)

    async def set_genesis(self, chain_id: int, genesis_hash: str, *, restarted_at: datetime | None) -> None:
        """Remember `genesis_hash` for `chain_id` (`restarted_at`: when a change of it was noticed)."""

        def save(connection: Connection) -> None:
            updated = connection.execute(
                sa.update(_CHAIN)
                .where(_CHAIN.c.chain_id == chain_id)
                .values(genesis_hash=genesis_hash, restarted_at=restarted_at)
            )
            if updated.rowcount == 0:
                connection.execute(
                    sa.insert(_CHAIN).values(
                        chain_id=chain_id, genesis_hash=genesis_hash, restarted_at=restarted_at
                    )
                )

        await write(self._engine, save)


def _about_chain() -> sa.ColumnElement[bool]:
    """A difference about the chain itself (unreadable, restarted): stored with no tenant and no payTo."""
    return sa.and_(
        _DIFFERENCES.c.tenant.is_(None),
        _DIFFERENCES.c.pay_to.is_(None),
        _DIFFERENCES.c.kind.in_(sorted(CHAIN_WIDE_KINDS)),
    )


def _concerns(tenant: str, pay_to: str) -> sa.ColumnElement[bool]:
    """A difference about `tenant`'s bookings, or about payments to its payee `pay_to` with no tenant."""
    return sa.or_(
        _DIFFERENCES.c.tenant == tenant,
        sa.and_(_DIFFERENCES.c.tenant.is_(None), _DIFFERENCES.c.pay_to == pay_to),
    )
