"""Alembic environment: async engines for SQLite and PostgreSQL, URL from the caller's Config."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from a2a_x402.storage import create_engine


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    engine = create_engine(context.config.get_main_option("sqlalchemy.url"))  # type: ignore[arg-type]
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; run against a database")
asyncio.run(_run_online())
