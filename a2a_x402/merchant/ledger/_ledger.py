"""Booking: settlements, their finality and their reversals, each one atomic with its webhook events.

Every write is one transaction that (1) takes the next ledger sequence number, which also serializes
ledger writes per database (see `allocate_sequence`), (2) inserts the immutable fact, whose unique
constraint is the only duplicate check (an `IntegrityError` there means "already recorded": the
transaction rolls back and the stored fact is returned), (3) posts the lines and moves the accounts'
cumulative totals, accounts locked in id order, and (4) hands the fact to the event sink on the same
connection. On PostgreSQL a settlement's (1) to (3) are one statement (`_pg_booking`), its accounts
created beforehand and locked by that statement after the sequence. Nothing is ever updated or
deleted except the accounts' totals, which are a projection of the lines kept in the same transaction.

Why stored totals rather than sums at read time: amounts are uint256, which SQLite can only keep exactly
as text, so SQL `SUM` is not exact there; totals updated under a lock keep balance reads O(1) and exact on
both backends, and `check_invariants` proves they equal the sums of the lines.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import fields, replace
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from a2a_x402.merchant.tenants import tenant_name
from a2a_x402.storage import write_transaction

from ._errors import (
    BookingConflictError,
    EntryNotReversibleError,
    EntryReversedError,
    InvalidBookingError,
    LedgerInvariantError,
)
from ._ids import new_id
from ._models import LedgerAccount, LedgerEntry, LedgerFinalization, LedgerLine, LedgerUnfinalized
from ._pg_booking import book_in_one_statement, ensure_accounts
from ._queries import LedgerReader, entry_from_row, entry_query, finalization_from_row
from ._records import (
    Ap2References,
    BookedEntry,
    EntryKind,
    EntryStatus,
    Finalization,
    LedgerEventSink,
    SettlementBooked,
    SettlementBooking,
    SettlementFinalized,
    SettlementReversed,
    utc,
)
from ._sequence import allocate_sequence

__all__ = ["Along", "Ap2Lookup", "Ledger"]

Along = Callable[[AsyncConnection], Awaitable[None]]
"""A write of the caller's that commits in the same transaction as a booking."""

Ap2Lookup = Callable[[AsyncConnection], Awaitable[Ap2References | None]]
"""Reads, in a booking's transaction, the AP2 references of the payment booked (None: made without)."""

logger = logging.getLogger(__name__)

_entries = cast(sa.Table, LedgerEntry.__table__)
_accounts = cast(sa.Table, LedgerAccount.__table__)
_lines = cast(sa.Table, LedgerLine.__table__)
_finalizations = cast(sa.Table, LedgerFinalization.__table__)
_unfinalized = cast(sa.Table, LedgerUnfinalized.__table__)

# The booking path's statements, built once and given their values per call: building a statement and its
# cache key on every booking cost about as much CPU as running it.
_INSERT_ENTRY = sa.insert(_entries)
_INSERT_FINALIZATION = sa.insert(_finalizations)
_INSERT_LINE = sa.insert(_lines)
_INSERT_UNFINALIZED = sa.insert(_unfinalized)
_UPDATE_TOTALS = (
    sa.update(_accounts)
    .where(_accounts.c.id == sa.bindparam("_id"))
    .values(debits_posted=sa.bindparam("_debits"), credits_posted=sa.bindparam("_credits"))
)
_LOCKED_ACCOUNTS = (
    sa.select(_accounts)
    .where(
        _accounts.c.tenant == sa.bindparam("_tenant"),
        _accounts.c.network == sa.bindparam("_network"),
        _accounts.c.asset == sa.bindparam("_asset"),
        sa.or_(
            sa.and_(_accounts.c.kind == "payer", _accounts.c.holder == sa.bindparam("_payer")),
            sa.and_(_accounts.c.kind == "revenue", _accounts.c.holder == ""),
        ),
    )
    .order_by(_accounts.c.id)
    .with_for_update()
)

# Fields that must match for a second booking of an authorization to be the same booking. The block
# number and settlement time are observations that a retry may report differently (a shallow reorg can
# move the same transaction to another block), so they are not compared.
_IDENTITY_FIELDS = ("tenant", "task_id", "context_id", "pay_to", "network", "amount", "tx_hash")
_REASON_MAX = 255


class _AlreadyRecorded(Exception):
    """A unique constraint fired on the fact's insert: raised out of the transaction so it rolls back."""

    def __init__(self, error: IntegrityError) -> None:
        super().__init__(str(error))
        self.error = error


def _now() -> datetime:
    return datetime.now(UTC)


class Ledger(LedgerReader):
    """The merchant's double-entry ledger in `engine`; every fact's events go to `events` atomically."""

    def __init__(self, engine: AsyncEngine, events: LedgerEventSink) -> None:
        super().__init__(engine)
        self._events = events

    async def book_settlement(
        self, booking: SettlementBooking, *, along: Along | None = None, ap2_of: Ap2Lookup | None = None
    ) -> BookedEntry:
        """Book a settled payment: debit the payer's account, credit the tenant's revenue account.

        Idempotent per authorization (chain id, asset, payer, nonce): booking it again returns the stored
        entry (with its current status, possibly `reversed`) and publishes nothing.

        `along` writes the caller's own record of the booking in the booking's transaction, so the two
        commit together; for a booking already recorded it runs in a transaction of its own. It runs first,
        before the sequence is taken, so the sequence's lock is not held through it (it must start with a
        write, which on SQLite takes the database's write lock as the sequence's UPDATE would).

        `ap2_of`, for a booking without `ap2`, reads the payment's AP2 references in the same transaction
        (after `along`), and the entry is written with them.

        Raises:
            BookingConflictError: the authorization is booked with a different tenant, task, context,
                payee, network, amount or transaction.
        """
        try:
            async with write_transaction(self._engine) as connection:
                if along is not None:
                    await along(connection)
                if ap2_of is not None and booking.ap2 is None:
                    booking = replace(booking, ap2=await ap2_of(connection))
                entry = await self._book(connection, booking)
        except _AlreadyRecorded as duplicate:
            existing = await self.find_settlement(
                booking.chain_id, booking.asset, booking.payer, booking.nonce
            )
            if existing is None:  # the constraint that fired was not the authorization's
                raise duplicate.error from None
            differing = [
                name for name in _IDENTITY_FIELDS if getattr(existing, name) != getattr(booking, name)
            ]
            if differing:
                raise BookingConflictError(existing.id, differing) from None
            if along is not None:
                async with write_transaction(self._engine) as connection:
                    await along(connection)
            return existing
        logger.info(
            "booked settlement %s (tenant %s, amount %d, tx %s)",
            entry.id,
            tenant_name(entry.tenant),
            entry.amount,
            entry.tx_hash,
            extra={"outcome": "settled", "entry_id": entry.id, "tx_hash": entry.tx_hash},
        )
        return entry

    async def reverse_settlement(
        self, entry_id: str, *, reason: str = "reorg", reversed_at: datetime | None = None
    ) -> BookedEntry:
        """Book the reversal of settlement `entry_id` (its transaction left the chain); returns the reversal.

        The settlement entry is untouched; a new entry moves the amount back (debit revenue, credit the
        payer) and publishes `settlement.reversed`. Idempotent: a second call returns the existing reversal.

        Raises:
            EntryNotFoundError: there is no such entry.
            EntryNotReversibleError: the entry is itself a reversal.
            InvalidBookingError: `reason` is empty or too long, or `reversed_at` is naive.
        """
        if not reason or len(reason) > _REASON_MAX:
            raise InvalidBookingError(f"reason: must be 1 to {_REASON_MAX} characters")
        when = utc(reversed_at, "reversed_at") if reversed_at is not None else _now()
        try:
            async with write_transaction(self._engine) as connection:
                reversal = await self._reverse(connection, entry_id, reason, when)
        except _AlreadyRecorded:
            async with self._engine.connect() as connection:
                row = (
                    await connection.execute(entry_query().where(_entries.c.reverses_entry_id == entry_id))
                ).one()
            return entry_from_row(row)
        logger.info("reversed settlement %s with %s (%s)", entry_id, reversal.id, reason)
        return reversal

    async def mark_final(
        self, entry_id: str, *, confirmations: int, finalized_at: datetime | None = None
    ) -> Finalization:
        """Record that settlement `entry_id` reached `confirmations` blocks of depth; publishes
        `settlement.finalized`. Idempotent: a second call returns the first finalization.

        Raises:
            EntryNotFoundError: there is no such entry.
            EntryReversedError: the settlement was reversed.
            InvalidBookingError: the entry is a reversal, `confirmations` < 1, or `finalized_at` is naive.
        """
        if isinstance(confirmations, bool) or not isinstance(confirmations, int) or confirmations < 1:
            raise InvalidBookingError(f"confirmations: must be a positive integer, got {confirmations!r}")
        when = utc(finalized_at, "finalized_at") if finalized_at is not None else _now()
        try:
            async with write_transaction(self._engine) as connection:
                finalization = await self._finalize(connection, entry_id, confirmations, when)
        except _AlreadyRecorded:
            async with self._engine.connect() as connection:
                row = (
                    await connection.execute(
                        sa.select(_finalizations).where(_finalizations.c.entry_id == entry_id)
                    )
                ).one()
            return finalization_from_row(row)
        logger.info("settlement %s final after %d confirmations", entry_id, confirmations)
        return finalization

    async def _book(self, connection: AsyncConnection, booking: SettlementBooking) -> BookedEntry:
        postgres = connection.dialect.name == "postgresql"
        entry = BookedEntry(
            id=new_id("je"),
            sequence=0 if postgres else await allocate_sequence(connection),
            kind=EntryKind.SETTLEMENT,
            status=EntryStatus.SETTLED,
            tenant=booking.tenant,
            task_id=booking.task_id,
            context_id=booking.context_id,
            payer=booking.payer,
            pay_to=booking.pay_to,
            asset=booking.asset,
            network=booking.network,
            chain_id=booking.chain_id,
            nonce=booking.nonce,
            amount=booking.amount,
            tx_hash=booking.tx_hash,
            block_number=booking.block_number,
            effective_at=booking.settled_at,
            booked_at=_now(),
            maximum=booking.maximum,
            ap2_checkout_hash=None if booking.ap2 is None else booking.ap2.checkout_hash,
            ap2_payment_ref=None if booking.ap2 is None else booking.ap2.payment_ref,
            ap2_open_mandate=None if booking.ap2 is None else booking.ap2.open_mandate,
        )
        if postgres:
            entry = await _book_in_one_statement(connection, entry)
            await self._events.publish(connection, SettlementBooked(entry))
            return entry
        await _insert_entry(connection, entry)
        await connection.execute(_INSERT_UNFINALIZED, {"entry_id": entry.id, "sequence": entry.sequence})
        payer, revenue = await _lock_accounts(connection, entry)
        await _post(connection, entry.id, debit=payer, credit=revenue, amount=entry.amount)
        await self._events.publish(connection, SettlementBooked(entry))
        return entry

    async def _reverse(
        self, connection: AsyncConnection, entry_id: str, reason: str, when: datetime
    ) -> BookedEntry:
        sequence = await allocate_sequence(connection)
        original = await self._entry(connection, entry_id)
        if original.kind is not EntryKind.SETTLEMENT:
            raise EntryNotReversibleError(entry_id)
        reversal = BookedEntry(
            id=new_id("je"),
            sequence=sequence,
            kind=EntryKind.REVERSAL,
            status=EntryStatus.REVERSED,
            tenant=original.tenant,
            task_id=original.task_id,
            context_id=original.context_id,
            payer=original.payer,
            pay_to=original.pay_to,
            asset=original.asset,
            network=original.network,
            chain_id=original.chain_id,
            nonce=original.nonce,
            amount=original.amount,
            tx_hash=original.tx_hash,
            block_number=original.block_number,
            effective_at=when,
            booked_at=_now(),
            reverses_entry_id=original.id,
            reason=reason,
            maximum=original.maximum,
            ap2_checkout_hash=original.ap2_checkout_hash,
            ap2_payment_ref=original.ap2_payment_ref,
            ap2_open_mandate=original.ap2_open_mandate,
        )
        await _insert_entry(connection, reversal)
        await _watched_no_more(connection, original.id)
        payer, revenue = await _lock_accounts(connection, original)
        await _post(connection, reversal.id, debit=revenue, credit=payer, amount=original.amount)
        reversed_original = replace(original, status=EntryStatus.REVERSED)
        await self._events.publish(connection, SettlementReversed(reversed_original, reversal))
        return reversal

    async def _finalize(
        self, connection: AsyncConnection, entry_id: str, confirmations: int, when: datetime
    ) -> Finalization:
        sequence = await allocate_sequence(connection)
        entry = await self._entry(connection, entry_id)
        if entry.kind is not EntryKind.SETTLEMENT:
            raise InvalidBookingError(f"entry_id: {entry_id} is a reversal; only settlements become final")
        if entry.status is EntryStatus.REVERSED:
            raise EntryReversedError(entry_id)
        finalization = Finalization(
            id=new_id("jf"),
            entry_id=entry_id,
            sequence=sequence,
            confirmations=confirmations,
            finalized_at=when,
            recorded_at=_now(),
        )
        try:
            await connection.execute(_INSERT_FINALIZATION, _values(finalization))
        except IntegrityError as exc:
            raise _AlreadyRecorded(exc) from exc
        await _watched_no_more(connection, entry_id)
        final_entry = replace(entry, status=EntryStatus.FINALIZED)
        await self._events.publish(connection, SettlementFinalized(final_entry, finalization))
        return finalization


def _values(record: BookedEntry | Finalization) -> dict[str, Any]:
    return {field.name: getattr(record, field.name) for field in fields(record)}


async def _watched_no_more(connection: AsyncConnection, entry_id: str) -> None:
    """Take a settlement off the unfinalized list (a no-op for one finalized before it was reversed)."""
    await connection.execute(sa.delete(_unfinalized).where(_unfinalized.c.entry_id == entry_id))


async def _book_in_one_statement(connection: AsyncConnection, entry: BookedEntry) -> BookedEntry:
    """PostgreSQL's booking of a settlement (`_pg_booking`): `entry` with the sequence it took."""
    await ensure_accounts(connection, entry, entry.booked_at)
    try:
        sequence, lines = await book_in_one_statement(connection, entry)
    except IntegrityError as exc:
        raise _AlreadyRecorded(exc) from exc
    if lines != 2:
        raise LedgerInvariantError([f"entry {entry.id} would have {lines} lines, not two"])
    return replace(entry, sequence=sequence)


async def _insert_entry(connection: AsyncConnection, entry: BookedEntry) -> None:
    values = _values(entry)
    del values["status"]  # derived from the facts, never stored
    values["kind"] = entry.kind.value
    try:
        await connection.execute(_INSERT_ENTRY, values)
    except IntegrityError as exc:
        raise _AlreadyRecorded(exc) from exc


async def _lock_accounts(connection: AsyncConnection, entry: BookedEntry) -> tuple[sa.Row[Any], sa.Row[Any]]:
    """Return the entry's payer and revenue accounts (payer, revenue), locked; created first if missing."""
    rows = await _locked_accounts(connection, entry)
    if len(rows) == 2:
        return rows["payer"], rows["revenue"]
    now = _now()
    key = {"tenant": entry.tenant, "network": entry.network, "asset": entry.asset}
    wanted = {
        "payer": {**key, "kind": "payer", "holder": entry.payer, "normal_side": "debit"},
        "revenue": {**key, "kind": "revenue", "holder": "", "normal_side": "credit"},
    }
    insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    for kind in wanted.keys() - rows.keys():
        statement = insert(_accounts).values(
            id=new_id("acct"), debits_posted=0, credits_posted=0, created_at=now, **wanted[kind]
        )
        # Another booking may create the same account first: then this insert does nothing.
        await connection.execute(
            statement.on_conflict_do_nothing(index_elements=["tenant", "network", "asset", "kind", "holder"])
        )
    rows = await _locked_accounts(connection, entry)
    return rows["payer"], rows["revenue"]


async def _locked_accounts(connection: AsyncConnection, entry: BookedEntry) -> dict[str, sa.Row[Any]]:
    """The entry's existing payer and revenue accounts by kind, locked in id order.

    Locking in id order makes two transactions touching the same accounts always queue in the same order.
    """
    parameters = {
        "_tenant": entry.tenant,
        "_network": entry.network,
        "_asset": entry.asset,
        "_payer": entry.payer,
    }
    rows = (await connection.execute(_LOCKED_ACCOUNTS, parameters)).all()
    return {row.kind: row for row in rows}


async def _post(
    connection: AsyncConnection, entry_id: str, *, debit: sa.Row[Any], credit: sa.Row[Any], amount: int
) -> None:
    """Write the entry's two lines and move both accounts' totals; the entry balances by construction.

    Both lines go in one INSERT and both totals in one executemany: the booking holds the ledger sequence's
    lock, so every round trip saved here shortens the time other bookings wait for it.
    """
    lines: list[dict[str, Any]] = []
    totals: list[dict[str, Any]] = []
    for account, direction in ((debit, "debit"), (credit, "credit")):
        debits = account.debits_posted + (amount if direction == "debit" else 0)
        credits = account.credits_posted + (amount if direction == "credit" else 0)
        balance_after = credits - debits if account.normal_side == "credit" else debits - credits
        if balance_after < 0:
            # Only a reversal lowers a balance, and it undoes an earlier line of the same amount.
            raise LedgerInvariantError([f"account {account.id} would go negative by entry {entry_id}"])
        lines.append(
            {
                "id": new_id("jl"),
                "entry_id": entry_id,
                "account_id": account.id,
                "direction": direction,
                "amount": amount,
                "balance_after": balance_after,
            }
        )
        totals.append({"_id": account.id, "_debits": debits, "_credits": credits})
    await connection.execute(_INSERT_LINE, lines)
    await connection.execute(_UPDATE_TOTALS, totals)
