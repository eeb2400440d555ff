"""The test's own hand on the merchants' PostgreSQL database: hold a lock, see who waits on it, cut them off.

Holding a lock the merchant needs stops it at an exact point of its work (its statement waits) without
any hook in the product: the test then SIGKILLs the process there, or terminates its database connection
in the middle of its transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa

from a2a_x402.storage import create_engine

__all__ = ["DatabaseProbe"]


class DatabaseProbe:
    """Locks and session control on one database, on connections of its own."""

    def __init__(self, url: str) -> None:
        self._engine = create_engine(url, pool_size=4, max_overflow=4)

    async def aclose(self) -> None:
        """Close the probe's connections (releasing any lock still held)."""
        await self._engine.dispose()

    @asynccontextmanager
    async def locked(self, statement: str, **params: Any) -> AsyncIterator[None]:
        """Run a locking `statement` in a transaction that stays open (the lock held) until the block ends."""
        async with self._engine.connect() as connection, connection.begin():
            await connection.execute(sa.text(statement), params)
            yield

    async def waiting(self, query_prefix: str) -> list[int]:
        """The backends of this database waiting for a lock while running a statement starting so."""
        statement = sa.text(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query ILIKE :prefix"
        )
        async with self._engine.connect() as connection:
            rows = await connection.execute(statement, {"prefix": query_prefix + "%"})
            return [int(pid) for (pid,) in rows]

    async def terminate(self, pid: int) -> None:
        """Cut backend `pid`'s connection, as a network failure or a database restart would."""
        async with self._engine.connect() as connection:
            await connection.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    async def scalar(self, statement: str, **params: Any) -> Any:
        """The first column of the first row of a query (None without rows)."""
        async with self._engine.connect() as connection:
            return (await connection.execute(sa.text(statement), params)).scalar()
