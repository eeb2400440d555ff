"""Reading the books: entries, balances and statements. Never writes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa
from eth_utils.address import is_hex_address, to_checksum_address
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ._errors import EntryNotFoundError, InvalidBookingError
from ._models import LedgerAccount, LedgerEntry, LedgerFinalization, LedgerLine, LedgerUnfinalized
from ._records import (
    Balance,
    BookedEntry,
    DailyRevenue,
    EntryKind,
    EntryStatus,
    Finalization,
    PayerTotal,
    SettlementRecord,
    StatementLine,
    utc,
)
from ._tallies import payer_count, payer_totals

__all__ = [
    "LedgerReader",
    "entry_from_row",
    "entry_query",
    "finalization_from_row",
    "normalize_address",
]

_entries = cast(sa.Table, LedgerEntry.__table__)
_reversals = _entries.alias("reversal")
_accounts = cast(sa.Table, LedgerAccount.__table__)
_lines = cast(sa.Table, LedgerLine.__table__)
_finalizations = cast(sa.Table, LedgerFinalization.__table__)
_unfinalized = cast(sa.Table, LedgerUnfinalized.__table__)

# SQLite allows 999 bound parameters per statement (older builds); a chain scan may ask about thousands.
_NONCES_PER_QUERY = 500
_SETTLEMENTS_LIMIT_MAX = 500


def normalize_address(name: str, value: str) -> str:
    """`value` in EIP-55 form.

    Raises:
        InvalidBookingError: `value` is not a 20-byte hex address.
    """
    if not isinstance(value, str) or not is_hex_address(value):
        raise InvalidBookingError(f"{name}: must be a 0x-prefixed 20-byte hex address, got {value!r}")
    return to_checksum_address(value)


def entry_query() -> sa.Select[Any]:
    """Entries with what is needed to derive their status: the id of their reversal and finalization."""
    return (
        sa.select(
            _entries,
            _reversals.c.id.label("reversed_by"),
            _finalizations.c.id.label("finalization_id"),
        )
        .outerjoin(_reversals, _reversals.c.reverses_entry_id == _entries.c.id)
        .outerjoin(_finalizations, _finalizations.c.entry_id == _entries.c.id)
    )


def _status(kind: EntryKind, reversed_by: str | None, finalization_id: str | None) -> EntryStatus:
    if kind is EntryKind.REVERSAL or reversed_by is not None:
        return EntryStatus.REVERSED
    return EntryStatus.FINALIZED if finalization_id is not None else EntryStatus.SETTLED


def entry_from_row(row: sa.Row[Any]) -> BookedEntry:
    """A row of `entry_query()` as a `BookedEntry`."""
    kind = EntryKind(row.kind)
    return BookedEntry(
        id=row.id,
        sequence=row.sequence,
        kind=kind,
        status=_status(kind, row.reversed_by, row.finalization_id),
        tenant=row.tenant,
        task_id=row.task_id,
        context_id=row.context_id,
        payer=row.payer,
        pay_to=row.pay_to,
        asset=row.asset,
        network=row.network,
        chain_id=row.chain_id,
        nonce=row.nonce,
        amount=row.amount,
        tx_hash=row.tx_hash,
        block_number=row.block_number,
        effective_at=row.effective_at,
        booked_at=row.booked_at,
        reverses_entry_id=row.reverses_entry_id,
        reason=row.reason,
        maximum=row.maximum,
        ap2_checkout_hash=row.ap2_checkout_hash,
        ap2_payment_ref=row.ap2_payment_ref,
        ap2_open_mandate=row.ap2_open_mandate,
    )


def finalization_from_row(row: sa.Row[Any]) -> Finalization:
    """A `ledger_finalizations` row as a `Finalization`."""
    return Finalization(
        id=row.id,
        entry_id=row.entry_id,
        sequence=row.sequence,
        confirmations=row.confirmations,
        finalized_at=row.finalized_at,
        recorded_at=row.recorded_at,
    )


class LedgerReader:
    """Read access to the books in `engine` (migrated to the `merchant` head)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get_entry(self, entry_id: str) -> BookedEntry:
        """The journal entry `entry_id`, with its current status.

        Raises:
            EntryNotFoundError: there is no such entry.
        """
        async with self._engine.connect() as connection:
            return await self._entry(connection, entry_id)

    async def find_settlement(self, chain_id: int, asset: str, payer: str, nonce: str) -> BookedEntry | None:
        """The settlement entry booked for this EIP-3009 authorization, or None."""
        condition = sa.and_(
            _entries.c.kind == EntryKind.SETTLEMENT.value,
            _entries.c.chain_id == chain_id,
            _entries.c.asset == normalize_address("asset", asset),
            _entries.c.payer == normalize_address("payer", payer),
            _entries.c.nonce == nonce.lower(),
        )
        async with self._engine.connect() as connection:
            row = (await connection.execute(entry_query().where(condition))).one_or_none()
        return None if row is None else entry_from_row(row)

    async def has_authorization(self, chain_id: int, asset: str, payer: str, nonce: str) -> bool:
        """Whether this EIP-3009 authorization has been booked (reversed or not)."""
        return await self.find_settlement(chain_id, asset, payer, nonce) is not None

    async def settlements_of(self, chain_id: int, asset: str, nonces: Iterable[str]) -> list[BookedEntry]:
        """The settlement entries (reversed or not) booked for authorizations of `asset` with one of
        `nonces`, by any payer: one query per 500 nonces.

        Raises:
            InvalidBookingError: `asset` is not an address.
        """
        asset = normalize_address("asset", asset)
        wanted = sorted({nonce.lower() for nonce in nonces})
        found: list[BookedEntry] = []
        async with self._engine.connect() as connection:
            for start in range(0, len(wanted), _NONCES_PER_QUERY):
                condition = sa.and_(
                    _entries.c.kind == EntryKind.SETTLEMENT.value,
                    _entries.c.chain_id == chain_id,
                    _entries.c.asset == asset,
                    _entries.c.nonce.in_(wanted[start : start + _NONCES_PER_QUERY]),
                )
                rows = await connection.execute(entry_query().where(condition))
                found += [entry_from_row(row) for row in rows]
        return found

    async def finalized_settlements_since(
        self, chain_id: int, asset: str, pay_tos: Iterable[str], from_block: int
    ) -> list[BookedEntry]:
        """Finalized, unreversed settlements of `asset` on `chain_id` to one of `pay_tos`, mined at or
        after `from_block`, in sequence order.

        Raises:
            InvalidBookingError: `asset` or a payTo is not an address.
        """
        condition = sa.and_(
            _entries.c.kind == EntryKind.SETTLEMENT.value,
            _entries.c.chain_id == chain_id,
            _entries.c.asset == normalize_address("asset", asset),
            _entries.c.pay_to.in_(sorted({normalize_address("pay_to", pay_to) for pay_to in pay_tos})),
            _entries.c.block_number >= from_block,
            _reversals.c.id.is_(None),
            _finalizations.c.id.is_not(None),
        )
        return await self._entries_in_sequence(condition)

    async def unfinalized_settlements(self, tenant: str | None = None) -> list[BookedEntry]:
        """Settlements neither finalized nor reversed yet (only `tenant`'s when given), in sequence order:
        what the reconciler still watches on chain."""
        statement = entry_query().join(_unfinalized, _unfinalized.c.entry_id == _entries.c.id)
        if tenant is not None:
            statement = statement.where(_entries.c.tenant == tenant)
        async with self._engine.connect() as connection:
            rows = (await connection.execute(statement.order_by(_unfinalized.c.sequence))).all()
        return [entry_from_row(row) for row in rows]

    async def settlements(
        self,
        tenant: str,
        *,
        status: EntryStatus | None = None,
        limit: int = 50,
        before: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[SettlementRecord]:
        """The tenant's most recent settlements with their finalization and reversal, newest first, at most
        `limit` (1 to 500); only those whose status is now `status` when given, whose sequence is below
        `before` (a page's cursor: the last sequence of the page before), and booked in [since, until).

        Raises:
            InvalidBookingError: `since` or `until` is naive.
        """
        condition = sa.and_(_entries.c.kind == EntryKind.SETTLEMENT.value, _entries.c.tenant == tenant)
        if status is not None:
            condition = sa.and_(condition, _status_condition(status))
        if before is not None:
            condition = sa.and_(condition, _entries.c.sequence < before)
        if since is not None:
            condition = sa.and_(condition, _entries.c.booked_at >= utc(since, "since"))
        if until is not None:
            condition = sa.and_(condition, _entries.c.booked_at < utc(until, "until"))
        limit = max(1, min(limit, _SETTLEMENTS_LIMIT_MAX))
        statement = entry_query().where(condition).order_by(_entries.c.sequence.desc()).limit(limit)
        async with self._engine.connect() as connection:
            entries = [entry_from_row(row) for row in await connection.execute(statement)]
            return await _with_facts(connection, entries)

    async def payers(self, tenant: str, *, limit: int = 50) -> list[PayerTotal]:
        """Per payer, network and asset: how many of the tenant's settlements stand (not reversed), their
        exact sum and the last one's booking time; the `limit` (1 to 500) largest totals, largest first.
        Summed by the database (`_tallies`)."""
        async with self._engine.connect() as connection:
            return await payer_totals(connection, tenant, limit=max(1, min(limit, _SETTLEMENTS_LIMIT_MAX)))

    async def payer_count(self, tenant: str) -> int:
        """How many rows `payers` has for the tenant without a limit."""
        async with self._engine.connect() as connection:
            return await payer_count(connection, tenant)

    async def settlement_count(self, tenant: str, *, status: EntryStatus | None = None) -> int:
        """How many settlements the tenant has (only those whose status is now `status` when given)."""
        condition = sa.and_(_entries.c.kind == EntryKind.SETTLEMENT.value, _entries.c.tenant == tenant)
        if status is not None:
            condition = sa.and_(condition, _status_condition(status))
        statement = sa.select(sa.func.count()).select_from(entry_query().where(condition).subquery())
        async with self._engine.connect() as connection:
            return int((await connection.execute(statement)).scalar_one())

    async def settlement(self, tenant: str, entry_id: str) -> SettlementRecord:
        """The tenant's settlement `entry_id`, with its finalization and reversal.

        Raises:
            EntryNotFoundError: the tenant has no settlement with this id (another tenant's entry, or a
                reversal's id, is not found either).
        """
        condition = sa.and_(
            _entries.c.id == entry_id,
            _entries.c.tenant == tenant,
            _entries.c.kind == EntryKind.SETTLEMENT.value,
        )
        async with self._engine.connect() as connection:
            row = (await connection.execute(entry_query().where(condition))).one_or_none()
            if row is None:
                raise EntryNotFoundError(entry_id)
            (record,) = await _with_facts(connection, [entry_from_row(row)])
        return record

    async def daily_revenue(self, tenant: str, since: datetime, until: datetime) -> list[DailyRevenue]:
        """The tenant's revenue booked per UTC day in [since, until), per network and asset, by day; days
        without bookings are left out. Summed here, in Python integers: SQL `SUM` is not exact on SQLite's
        uint256 text.

        Raises:
            InvalidBookingError: `since` or `until` is naive.
        """
        totals: dict[tuple[Any, str, str], list[int]] = {}
        for line in await self.statement(tenant, since, until):
            key = (line.booked_at.astimezone(UTC).date(), line.network, line.asset)
            sums = totals.setdefault(key, [0, 0])
            sums[0 if line.direction == "credit" else 1] += line.amount
        return [
            DailyRevenue(day=day, network=network, asset=asset, credits=credits, debits=debits)
            for (day, network, asset), (credits, debits) in sorted(totals.items())
        ]

    async def unfinalized_count(self) -> int:
        """How many settlements are neither finalized nor reversed yet (the unfinalized list's length)."""
        async with self._engine.connect() as connection:
            return int(
                (await connection.execute(sa.select(sa.func.count()).select_from(_unfinalized))).scalar_one()
            )

    async def tenants(self) -> set[str]:
        """Every tenant with an account in the ledger (one that was booked for), configured or not."""
        async with self._engine.connect() as connection:
            rows = await connection.execute(sa.select(_accounts.c.tenant).distinct())
            return {row.tenant for row in rows}

    async def balance(self, tenant: str, asset: str | None = None) -> list[Balance]:
        """The tenant's revenue balance per network and asset (only `asset` when given), sorted."""
        statement = sa.select(_accounts).where(_accounts.c.tenant == tenant, _accounts.c.kind == "revenue")
        if asset is not None:
            statement = statement.where(_accounts.c.asset == normalize_address("asset", asset))
        statement = statement.order_by(_accounts.c.network, _accounts.c.asset)
        async with self._engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [
            Balance(
                tenant=row.tenant,
                network=row.network,
                asset=row.asset,
                account_id=row.id,
                balance=row.credits_posted - row.debits_posted,
                credits=row.credits_posted,
                debits=row.debits_posted,
            )
            for row in rows
        ]

    async def statement(
        self, tenant: str, since: datetime | None = None, until: datetime | None = None
    ) -> list[StatementLine]:
        """Every movement of the tenant's revenue accounts booked in [since, until), in sequence order.

        The window is on booking time, not on-chain time: a statement for a closed period never changes
        afterwards, even when a late booking reports an older settlement (`effective_at` shows that time).
        `status` is the settlement's status now.

        Raises:
            InvalidBookingError: `since` or `until` is naive.
        """
        statement = (
            sa.select(
                _lines.c.direction,
                _lines.c.amount.label("line_amount"),
                _lines.c.balance_after,
                _entries,
                _reversals.c.id.label("reversed_by"),
                _finalizations.c.id.label("finalization_id"),
            )
            .select_from(_lines)
            .join(_accounts, _accounts.c.id == _lines.c.account_id)
            .join(_entries, _entries.c.id == _lines.c.entry_id)
            .outerjoin(_reversals, _reversals.c.reverses_entry_id == _entries.c.id)
            .outerjoin(_finalizations, _finalizations.c.entry_id == _entries.c.id)
            # Entries stay inside one tenant: naming it on the entries lets the window use their index.
            .where(_entries.c.tenant == tenant, _accounts.c.tenant == tenant, _accounts.c.kind == "revenue")
            .order_by(_entries.c.sequence, _lines.c.id)
        )
        if since is not None:
            statement = statement.where(_entries.c.booked_at >= utc(since, "since"))
        if until is not None:
            statement = statement.where(_entries.c.booked_at < utc(until, "until"))
        async with self._engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [_statement_line(row) for row in rows]

    async def _entries_in_sequence(self, condition: sa.ColumnElement[bool]) -> list[BookedEntry]:
        async with self._engine.connect() as connection:
            rows = (
                await connection.execute(entry_query().where(condition).order_by(_entries.c.sequence))
            ).all()
        return [entry_from_row(row) for row in rows]

    async def _entry(self, connection: AsyncConnection, entry_id: str) -> BookedEntry:
        row = (await connection.execute(entry_query().where(_entries.c.id == entry_id))).one_or_none()
        if row is None:
            raise EntryNotFoundError(entry_id)
        return entry_from_row(row)


def _status_condition(status: EntryStatus) -> sa.ColumnElement[bool]:
    """Rows of `entry_query()` whose settlement is now in `status` (from the facts `_status` reads)."""
    if status is EntryStatus.REVERSED:
        return _reversals.c.id.is_not(None)
    finalized = (
        _finalizations.c.id.is_not(None) if status is EntryStatus.FINALIZED else _finalizations.c.id.is_(None)
    )
    return sa.and_(_reversals.c.id.is_(None), finalized)


async def _with_facts(connection: AsyncConnection, entries: Sequence[BookedEntry]) -> list[SettlementRecord]:
    """`entries` (settlements) with their finalization and reversal: two queries, whatever their number."""
    ids = [entry.id for entry in entries]
    if not ids:
        return []
    finalizations = {
        row.entry_id: finalization_from_row(row)
        for row in await connection.execute(
            sa.select(_finalizations).where(_finalizations.c.entry_id.in_(ids))
        )
    }
    reversals = {
        row.reverses_entry_id: entry_from_row(row)
        for row in await connection.execute(entry_query().where(_entries.c.reverses_entry_id.in_(ids)))
    }
    return [
        SettlementRecord(
            entry=entry, finalization=finalizations.get(entry.id), reversal=reversals.get(entry.id)
        )
        for entry in entries
    ]


def _statement_line(row: sa.Row[Any]) -> StatementLine:
    entry = entry_from_row(row)
    return StatementLine(
        sequence=entry.sequence,
        entry_id=entry.id,
        kind=entry.kind,
        status=entry.status,
        booked_at=entry.booked_at,
        effective_at=entry.effective_at,
        task_id=entry.task_id,
        context_id=entry.context_id,
        payer=entry.payer,
        pay_to=entry.pay_to,
        network=entry.network,
        asset=entry.asset,
        direction=row.direction,
        amount=row.line_amount,
        balance_after=row.balance_after,
        tx_hash=entry.tx_hash,
        block_number=entry.block_number,
        reverses_entry_id=entry.reverses_entry_id,
        ap2=entry.ap2,
    )
