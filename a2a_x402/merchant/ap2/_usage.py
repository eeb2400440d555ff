"""The merchant's record of what it accepted under each open AP2 payment mandate (§20.5 step 5).

An open payment mandate's budget and recurrence constraints are checked against what this merchant has
accepted under it: the sum of the accepted ``payment_amount``s, their number and the time of the last
(``MandateUsage``, what the SDK's evaluators read). The record is keyed by the hash of the open mandate's
issuer-signed JWT, which does not change with the disclosures presented.

A payment counts from the moment its mandates are accepted (``reserve``), and stops counting if its
round ends with nothing settled (``release``), or if its task is purged unpaid with the payment never
taken (``release_tasks_in``); a settled round's use stays (``confirm``). The payment
layer decides it with ``decide_in``, in the transaction that records how the round ended. Each closed
payment mandate is one use, keyed by its reference: presented again for its own round (T13) it is the
same use, counted once, and for any other round it is refused. A round has at most one live use: the
mandates of a second payment in a round whose first holds one are refused.

Reserving is race-safe: the open mandate's row is locked (``FOR UPDATE`` on PostgreSQL; on SQLite the
one writer holds the database), step 5 is evaluated again against the record as locked, and only then
is the use written and counted. Of two payments that fit the budget only one at a time, one is refused.
A refusal writes nothing. ``reserve_in`` does the same on the caller's connection, inside a write of its
own (the payment's presentation), so that both are committed together or not at all.

Tables ``ap2_mandate_usage`` and ``ap2_mandate_uses``, migration m0016.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.extension import Ap2ErrorCode
from a2a_x402.storage import UtcDateTime, write

from ._sdk import MandateRefused, MandateUsage
from ._verify import AcceptedMandates

__all__ = ["MandateUsageStore", "Reservation", "UseState", "mandate_usage_metadata", "use_of_payment"]

mandate_usage_metadata = sa.MetaData()
"""The tables of this module, for comparing them with the migrations."""

# The uses that count. The partial index's predicate, used verbatim by the queries that want the index
# (SQLite uses a partial index only for a WHERE clause that implies its predicate as written).
_LIVE = "state IN ('reserved', 'confirmed')"

usage_table = sa.Table(
    "ap2_mandate_usage",
    mandate_usage_metadata,
    sa.Column("open_mandate", sa.String(43), primary_key=True),
    sa.Column("total", sa.BigInteger, nullable=False),
    sa.Column("uses", sa.Integer, nullable=False),
    sa.Column("last_used_at", UtcDateTime(), nullable=True),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
)

uses_table = sa.Table(
    "ap2_mandate_uses",
    mandate_usage_metadata,
    sa.Column("reference", sa.String(43), primary_key=True),
    sa.Column(
        "open_mandate",
        sa.String(43),
        sa.ForeignKey(usage_table.c.open_mandate, name="fk_ap2_mandate_uses_open_mandate"),
        nullable=False,
    ),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("task_id", sa.String(64), nullable=False),
    sa.Column("round", sa.Integer, nullable=False),
    sa.Column("checkout_hash", sa.String(43), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("reserved_at", UtcDateTime(), nullable=False),
    sa.Column("decided_at", UtcDateTime(), nullable=True),
    sa.Column("payment_hash", sa.String(64), nullable=True),
    sa.Index("ix_ap2_mandate_uses_open_mandate", "open_mandate"),
    sa.Index(
        "uq_ap2_mandate_uses_live_round",
        "task_id",
        "round",
        unique=True,
        postgresql_where=sa.text(_LIVE),
        sqlite_where=sa.text(_LIVE),
    ),
)


class UseState(StrEnum):
    """Where one accepted payment mandate's use stands."""

    RESERVED = "reserved"
    """Accepted; its round is not decided yet. It counts."""
    CONFIRMED = "confirmed"
    """Its round settled. It counts for good."""
    RELEASED = "released"
    """Its round ended with nothing settled. It no longer counts."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """One accepted payment mandate's use: what the ledger and the receipts of its round name.

    Attributes:
        reference: the closed payment mandate's reference (the payment receipt's ``reference``).
        open_mandate: the key of the open payment mandate it counts against.
        tenant, task_id, round: the round it pays.
        checkout_hash: the hash of the round's checkout.
        amount: what it counts, in minor units of the mandate's currency.
        state: reserved, confirmed or released.
        reserved_at: when the mandates were accepted.
        decided_at: when it was confirmed or released.
        payment_hash: the payment presented with the mandates (the offers' ``payload_hash`` of it): only the
            settlement of that payment confirms the use.
    """

    reference: str
    open_mandate: str
    tenant: str
    task_id: str
    round: int
    checkout_hash: str
    amount: int
    state: UseState
    reserved_at: datetime
    decided_at: datetime | None
    payment_hash: str | None = None


_USAGE = sa.select(usage_table.c.total, usage_table.c.uses, usage_table.c.last_used_at).where(
    usage_table.c.open_mandate == sa.bindparam("_key")
)
_LOCKED_USAGE = _USAGE.with_for_update()
_USE = sa.select(uses_table).where(uses_table.c.reference == sa.bindparam("_reference"))
_ROUND_USE = sa.select(uses_table).where(
    uses_table.c.task_id == sa.bindparam("_task_id"),
    uses_table.c.round == sa.bindparam("_round"),
    sa.text(_LIVE),
)
_LATEST_ROUND_USE = (
    sa.select(uses_table)
    .where(uses_table.c.task_id == sa.bindparam("_task_id"), uses_table.c.round == sa.bindparam("_round"))
    .order_by(uses_table.c.reserved_at.desc())
    .limit(1)
)
_DECIDE = (
    sa.update(uses_table)
    .where(
        uses_table.c.reference == sa.bindparam("_reference"), uses_table.c.state == UseState.RESERVED.value
    )
    .values(state=sa.bindparam("_state"), decided_at=sa.bindparam("_now"))
)
# The uses a round's end releases: its own and any earlier round's still reserved, the open mandates in one
# order so that two releases lock their records in the same order.
_RESERVED_UP_TO = (
    sa.select(uses_table)
    .where(
        uses_table.c.task_id == sa.bindparam("_task_id"),
        uses_table.c.round <= sa.bindparam("_round"),
        uses_table.c.state == UseState.RESERVED.value,
    )
    .order_by(uses_table.c.open_mandate, uses_table.c.reference)
)
# The uses of tasks the purge of unpaid work deletes: their payment can never be taken any more.
_RESERVED_OF_TASKS = (
    sa.select(uses_table)
    .where(
        uses_table.c.task_id.in_(sa.bindparam("_task_ids", expanding=True)),
        uses_table.c.state == UseState.RESERVED.value,
    )
    .order_by(uses_table.c.open_mandate, uses_table.c.reference)
)
_LAST_USED = sa.select(sa.func.max(uses_table.c.reserved_at)).where(
    uses_table.c.open_mandate == sa.bindparam("_key"), sa.text(_LIVE)
)


class MandateUsageStore:
    """The usage record of open payment mandates in ``engine`` (see the module)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def usage(self, open_mandate: str) -> MandateUsage:
        """What was accepted under ``open_mandate`` and still counts (nothing: a zero record). A
        ``UsageReader`` for ``verify_mandates``."""
        async with self._engine.connect() as connection:
            row = (await connection.execute(_USAGE, {"_key": open_mandate})).first()
        return _usage_of(row)

    async def reservation(self, task_id: str, round_: int) -> Reservation | None:
        """The use that counts for round ``round_`` of ``task_id`` (reserved or confirmed), if any."""
        async with self._engine.connect() as connection:
            row = (await connection.execute(_ROUND_USE, {"_task_id": task_id, "_round": round_})).first()
        return None if row is None else _reservation_of(row)

    async def round_use(self, task_id: str, round_: int) -> Reservation | None:
        """The latest use reserved for round ``round_`` of ``task_id``, whatever became of it, if any."""
        async with self._engine.connect() as connection:
            values = {"_task_id": task_id, "_round": round_}
            row = (await connection.execute(_LATEST_ROUND_USE, values)).first()
        return None if row is None else _reservation_of(row)

    async def reserve(
        self,
        accepted: AcceptedMandates,
        *,
        tenant: str,
        task_id: str,
        round_: int,
        payment_hash: str | None = None,
        now: datetime | None = None,
    ) -> Reservation:
        """Count the payment of ``accepted`` against its open mandate, for round ``round_`` of ``task_id``,
        in a transaction of its own; ``reserve_in`` says how.

        Raises:
            MandateRefused: as ``reserve_in``; nothing was written.
        """

        def operation(connection: sa.Connection) -> Reservation:
            return self.reserve_in(
                connection,
                accepted,
                tenant=tenant,
                task_id=task_id,
                round_=round_,
                payment_hash=payment_hash,
                now=now,
            )

        return await write(self._engine, operation, isolated=True)

    def reserve_in(
        self,
        connection: sa.Connection,
        accepted: AcceptedMandates,
        *,
        tenant: str,
        task_id: str,
        round_: int,
        payment_hash: str | None = None,
        now: datetime | None = None,
    ) -> Reservation:
        """``reserve`` inside the caller's write on ``connection`` (a ``storage.write`` operation); the use
        is of the payment ``payment_hash`` names, which alone confirms it when its round is paid.

        The open mandate's record is locked, step 5 of §20.5 is evaluated again against it
        (``AcceptedMandates.check_usage``), and the use is written and counted. The closed payment mandate
        presented again for the same round is the same use: its reservation is returned, nothing counted.

        Raises:
            MandateRefused: ``invalid_mandate`` when the record as locked exceeds a constraint (the budget,
                the recurrence), when the closed payment mandate was used for another round or in one that
                ended, or when another payment's mandates count for this round; nothing was written.
        """
        moment = now or datetime.now(UTC)
        key = accepted.open_mandate
        insert = (postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert)(
            usage_table
        )
        connection.execute(
            insert.on_conflict_do_nothing(index_elements=["open_mandate"]),
            {"open_mandate": key, "total": 0, "uses": 0, "last_used_at": None, "updated_at": moment},
        )
        record = connection.execute(_LOCKED_USAGE, {"_key": key}).one()
        existing = connection.execute(_USE, {"_reference": accepted.payment_reference}).first()
        if existing is not None:
            use = _reservation_of(existing)
            if (use.task_id, use.round) == (task_id, round_) and use.state is not UseState.RELEASED:
                return use
            raise MandateRefused(
                Ap2ErrorCode.INVALID_MANDATE,
                "this payment mandate was already used, for another round or in a round that ended",
            )
        accepted.check_usage(_usage_of(record))
        values: dict[str, Any] = {
            "reference": accepted.payment_reference,
            "open_mandate": key,
            "tenant": tenant,
            "task_id": task_id,
            "round": round_,
            "checkout_hash": accepted.checkout_hash,
            "amount": accepted.amount,
            "state": UseState.RESERVED.value,
            "reserved_at": moment,
            "decided_at": None,
            "payment_hash": payment_hash,
        }
        try:
            # In a savepoint: the unique index refusing it must not end the caller's transaction.
            with connection.begin_nested():
                connection.execute(sa.insert(uses_table), values)
        except IntegrityError:
            raise MandateRefused(
                Ap2ErrorCode.INVALID_MANDATE, "another payment's mandates already count for this round"
            ) from None
        connection.execute(
            sa.update(usage_table)
            .where(usage_table.c.open_mandate == key)
            .values(
                total=usage_table.c.total + accepted.amount,
                uses=usage_table.c.uses + 1,
                last_used_at=moment,
                updated_at=moment,
            )
        )
        return _reservation_of(values)

    async def confirm(self, task_id: str, round_: int, *, now: datetime | None = None) -> bool:
        """Round ``round_`` of ``task_id`` settled: its reserved use counts for good, in a transaction of its
        own (``decide_in``). Whether there was one to confirm (a use already released stays released)."""
        return await self._decide(task_id, round_, settled=True, now=now)

    async def release(self, task_id: str, round_: int, *, now: datetime | None = None) -> bool:
        """Round ``round_`` of ``task_id`` ended with nothing settled: its reserved use stops counting, in a
        transaction of its own (``decide_in``). Whether there was one to release (a confirmed use stays)."""
        return await self._decide(task_id, round_, settled=False, now=now)

    async def _decide(self, task_id: str, round_: int, *, settled: bool, now: datetime | None) -> bool:
        def operation(connection: sa.Connection) -> bool:
            return self.decide_in(connection, task_id, round_, settled=settled, now=now) is not None

        return await write(self._engine, operation, isolated=True)

    def decide_in(
        self,
        connection: sa.Connection,
        task_id: str,
        round_: int,
        *,
        settled: bool,
        payment_hash: str | None = None,
        now: datetime | None = None,
    ) -> Reservation | None:
        """Round ``round_`` of ``task_id`` ended, inside the caller's write on ``connection`` (the offer's
        change of state): its reserved use is confirmed if the round ``settled`` the payment the mandates
        were presented with (``payment_hash``, the payment the round took), else released, so that a
        payment that moved nothing, or another payment of the round than theirs, does not use up the
        budget (§20.5).

        Any use still reserved for an earlier round of the task (one whose payment was never taken: its
        round was offered again, or the task canceled, between the presentation and the taking) is
        released too, since none of them can settle any more.

        Returns:
            The use of round ``round_`` as decided, or None when it had none still reserved.
        """
        moment = now or datetime.now(UTC)
        decided = None
        if settled:
            row = connection.execute(_ROUND_USE, {"_task_id": task_id, "_round": round_}).first()
            # Without a payment named (a caller that took none of its own), the round's use is the one paid.
            if row is not None and use_of_payment(row.payment_hash, payment_hash):
                changes = {"_reference": row.reference, "_state": UseState.CONFIRMED.value, "_now": moment}
                if connection.execute(_DECIDE, changes).rowcount == 1:
                    decided = replace(_reservation_of(row), state=UseState.CONFIRMED, decided_at=moment)
        # What is still reserved up to this round can settle no more: released (a confirmed use is not).
        releasing = {"_task_id": task_id, "_round": round_}
        for row in connection.execute(_RESERVED_UP_TO, releasing).all():
            if _release(connection, row, moment) and row.round == round_:
                decided = replace(_reservation_of(row), state=UseState.RELEASED, decided_at=moment)
        return decided

    def release_tasks_in(
        self, connection: sa.Connection, task_ids: list[str], *, now: datetime | None = None
    ) -> int:
        """Release every use still reserved for ``task_ids``, inside the caller's write on ``connection``
        (the purge deleting the tasks, unpaid past their retention): a payment presented with mandates but
        never taken can no longer settle, so its use gives the budget back. How many were released."""
        moment = now or datetime.now(UTC)
        rows = connection.execute(_RESERVED_OF_TASKS, {"_task_ids": task_ids}).all()
        return sum(_release(connection, row, moment) for row in rows)


def use_of_payment(presented_with: str | None, taken: str | None) -> bool:
    """Whether a use whose mandates came with the payment `presented_with` is the use of the payment a round
    took (`taken`), both by their `payload_hash`: a use or a round that names no payment is any payment's."""
    return taken is None or presented_with in (None, taken)


def _release(connection: sa.Connection, row: sa.Row[Any], moment: datetime) -> bool:
    """Release the reserved use ``row`` and take it off its open mandate's record: whether it was still
    reserved."""
    # The open mandate's record first, as a reservation locks it: the two never wait on each other.
    connection.execute(_LOCKED_USAGE, {"_key": row.open_mandate}).one()
    changes = {"_reference": row.reference, "_state": UseState.RELEASED.value, "_now": moment}
    if connection.execute(_DECIDE, changes).rowcount != 1:
        return False  # confirmed meanwhile
    last_used = connection.execute(_LAST_USED, {"_key": row.open_mandate}).scalar_one()
    connection.execute(
        sa.update(usage_table)
        .where(usage_table.c.open_mandate == row.open_mandate)
        .values(
            total=usage_table.c.total - row.amount,
            uses=usage_table.c.uses - 1,
            last_used_at=last_used,
            updated_at=moment,
        )
    )
    return True


def _usage_of(row: sa.Row[Any, Any, Any] | None) -> MandateUsage:
    if row is None:
        return MandateUsage()
    last_used = None if row.last_used_at is None else int(row.last_used_at.timestamp())
    return MandateUsage(total=int(row.total), uses=int(row.uses), last_used=last_used)


def _reservation_of(row: sa.Row[Any] | dict[str, Any]) -> Reservation:
    values = dict(row._mapping) if isinstance(row, sa.Row) else dict(row)
    values["state"] = UseState(values["state"])
    return Reservation(**values)
