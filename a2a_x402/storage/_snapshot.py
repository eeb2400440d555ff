"""Reads that see one consistent state of the database while other processes keep writing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["snapshot"]


@asynccontextmanager
async def snapshot(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection whose reads all see the same committed state (rolled back at the end).

    PostgreSQL's default READ COMMITTED takes a new snapshot per statement, and Python's sqlite3 starts no
    transaction before a SELECT, so without this a row written between two reads can show up in one and
    not the other (lines of an entry not yet read, totals moved after their lines were summed).
    """
    async with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            connection = await connection.execution_options(isolation_level="REPEATABLE READ")
            async with connection.begin():
                yield connection
        else:
            # A WAL read transaction: its snapshot is taken by its first read and kept to the end.
            await connection.exec_driver_sql("BEGIN")
            try:
                yield connection
            finally:
                await connection.rollback()
