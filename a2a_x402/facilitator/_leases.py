"""Relayer key leases in the shared database: each key is used by one process at a time.

A process takes a key by writing its holder id and an expiry into the key's row; it renews the expiry
while it runs and deletes the row on shutdown. A row past its expiry belongs to a process that vanished
(killed, cut off): another may take it over, but must first account for the transactions the vanished
holder left in flight (see `RelayerPool`). The row's compare-and-set update is what decides a race
between two takers, on PostgreSQL as on SQLite.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write

__all__ = ["Lease", "LeaseStore", "leases_table"]

metadata = sa.MetaData()

leases_table = sa.Table(
    "relayer_leases",
    metadata,
    sa.Column("chain_id", sa.BigInteger, primary_key=True),
    sa.Column("relayer", sa.String(42), primary_key=True),
    sa.Column("holder", sa.String(80), nullable=False),
    sa.Column("lease_until", UtcDateTime(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
)


@dataclass(frozen=True, slots=True)
class Lease:
    """A key taken by this process; `taken_over` when an earlier holder's lease had run out."""

    relayer: str
    taken_over: bool


def _now() -> datetime:
    return datetime.now(UTC)


class LeaseStore:
    """Takes, renews and gives back relayer keys for one holder (one process)."""

    def __init__(self, engine: AsyncEngine, *, chain_id: int, holder: str, lease_s: float):
        self._engine = engine
        self._chain_id = chain_id
        self.holder = holder
        self._lease = timedelta(seconds=lease_s)
        dialect_insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert
        self._insert = dialect_insert(leases_table).on_conflict_do_nothing().returning(leases_table.c.relayer)

    async def take(self, relayer: str) -> Lease | None:
        """Take `relayer` if nobody holds it, or if its holder's lease ran out; None if it is held."""
        now = _now()
        values = {
            "chain_id": self._chain_id,
            "relayer": relayer,
            "holder": self.holder,
            "lease_until": now + self._lease,
            "updated_at": now,
        }
        key = sa.and_(leases_table.c.chain_id == self._chain_id, leases_table.c.relayer == relayer)
        current = sa.select(leases_table.c.holder, leases_table.c.lease_until).where(key)

        def operation(connection: sa.Connection) -> bool | None:
            row = connection.execute(current).first()
            if row is None:
                inserted = connection.execute(self._insert, values).first()
                return False if inserted is not None else None
            holder, lease_until = row
            if holder != self.holder and lease_until >= now:
                return None
            # Compare-and-set on what was read: of two takers of one expired lease, one wins.
            swap = (
                leases_table.update()
                .where(key, leases_table.c.holder == holder, leases_table.c.lease_until == lease_until)
                .values(holder=self.holder, lease_until=now + self._lease, updated_at=now)
                .returning(leases_table.c.relayer)
            )
            if connection.execute(swap).first() is None:
                return None
            # Any row found is an earlier holder's (this process asks only for keys it does not hold),
            # even under this holder id: its transactions must be accounted for.
            return True

        taken_over = await write(self._engine, operation, isolated=True)
        return None if taken_over is None else Lease(relayer, taken_over)

    async def renew(self, relayers: list[str]) -> set[str]:
        """Push out the expiry of the keys still ours; returns those (a key lost meanwhile is not)."""
        if not relayers:
            return set()
        now = _now()
        statement = (
            leases_table.update()
            .where(
                leases_table.c.chain_id == self._chain_id,
                leases_table.c.relayer.in_(relayers),
                leases_table.c.holder == self.holder,
            )
            .values(lease_until=now + self._lease, updated_at=now)
            .returning(leases_table.c.relayer)
        )

        def operation(connection: sa.Connection) -> set[str]:
            return {row[0] for row in connection.execute(statement).all()}

        return await write(self._engine, operation)

    async def release(self, relayers: list[str]) -> None:
        """Give the keys back at once (a clean shutdown), so another process need not wait for expiry."""
        if not relayers:
            return
        statement = leases_table.delete().where(
            leases_table.c.chain_id == self._chain_id,
            leases_table.c.relayer.in_(relayers),
            leases_table.c.holder == self.holder,
        )
        await write(self._engine, lambda connection: connection.execute(statement))
