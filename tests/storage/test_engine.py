"""The PostgreSQL pool never hands out a connection the server closed, without a ping per checkout."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from a2a_x402.storage import create_engine


async def test_connections_the_server_closed_are_replaced_not_used(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    admin = create_engine(
        make_url(postgres_url).set(database="postgres").render_as_string(hide_password=False)
    )

    database = {"database": make_url(postgres_url).database}

    async def one() -> int:
        async with engine.connect() as connection:
            return int((await connection.execute(sa.text("SELECT 1"))).scalar_one())

    async def backends() -> int:
        async with admin.connect() as connection:
            count = "SELECT count(*) FROM pg_stat_activity WHERE datname = :database"
            return int((await connection.execute(sa.text(count), database)).scalar_one())

    try:
        assert await asyncio.gather(*(one() for _ in range(5))) == [1] * 5  # five pooled connections
        async with admin.connect() as connection:
            # What a server restart or a failover does to every idle connection of the pool. With a timeout,
            # pg_terminate_backend returns once each backend process has exited, so its socket is closed:
            # a backend leaves pg_stat_activity before that, with its FATAL message sent and its close not.
            terminated = await connection.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity"
                    " WHERE datname = :database AND pid <> pg_backend_pid()"
                ),
                database,
            )
            assert terminated.scalars().all().count(True) >= 5, "the terminated backends did not exit"
        # The closes were sent before this query's answer: the event loop, running it, has read them.
        assert await backends() == 0

        assert [await one() for _ in range(6)] == [1] * 6  # no request fails on a dead connection
    finally:
        await engine.dispose()
        await admin.dispose()
