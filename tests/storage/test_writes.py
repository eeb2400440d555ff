"""`write` on both backends: concurrent writes commit (on SQLite in groups, off the event loop's thread),
an isolated write that fails undoes only itself, a failing write that is not isolated fails its group,
and a disposed engine still writes; `write_transaction`s and groups of `write` take turns on SQLite."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import DatabaseUrlError, create_engine, write, write_transaction
from tests.fixtures.deadlines import HANG_S

_rows = sa.Table(
    "writes_rows", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True), sa.Column("note", sa.Text)
)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    async with engine.begin() as connection:
        await connection.run_sync(_rows.metadata.create_all)
    try:
        yield engine
    finally:
        await engine.dispose()


def _insert(row_id: int, threads: list[int] | None = None) -> Callable[[sa.Connection], int]:
    def operation(connection: sa.Connection) -> int:
        if threads is not None:
            threads.append(threading.get_ident())
        connection.execute(_rows.insert(), {"id": row_id, "note": f"row {row_id}"})
        return row_id

    return operation


async def _ids(engine: AsyncEngine) -> list[int]:
    async with engine.connect() as connection:
        return list((await connection.execute(sa.select(_rows.c.id).order_by(_rows.c.id))).scalars())


async def test_concurrent_writes_all_commit_and_return_their_results(engine: AsyncEngine) -> None:
    threads: list[int] = []

    results = await asyncio.gather(*(write(engine, _insert(i, threads)) for i in range(100)))

    assert results == list(range(100))
    assert await _ids(engine) == list(range(100))
    if engine.dialect.name == "sqlite":
        # The group runs on the writer's thread, never on the event loop's.
        assert set(threads) == {threads[0]} and threads[0] != threading.get_ident()


async def test_an_isolated_write_that_fails_undoes_only_itself(engine: AsyncEngine) -> None:
    await write(engine, _insert(1))

    results = await asyncio.gather(
        write(engine, _insert(2), isolated=True),
        write(engine, _insert(1), isolated=True),  # the same key again
        write(engine, _insert(3), isolated=True),
        return_exceptions=True,
    )

    assert results[0] == 2 and results[2] == 3
    assert isinstance(results[1], IntegrityError)
    assert await _ids(engine) == [1, 2, 3]


async def test_a_failing_write_that_is_not_isolated_fails_its_group(engine: AsyncEngine) -> None:
    await write(engine, _insert(1))

    results = await asyncio.gather(
        write(engine, _insert(2)), write(engine, _insert(1)), return_exceptions=True
    )

    assert isinstance(results[1], IntegrityError)
    if engine.dialect.name == "sqlite":
        # One transaction for the group: its other write is undone too, and told so.
        assert isinstance(results[0], IntegrityError)
        assert await _ids(engine) == [1]
    else:
        assert results[0] == 2
        assert await _ids(engine) == [1, 2]


async def test_a_group_opening_with_an_isolated_write_is_still_one_transaction(engine: AsyncEngine) -> None:
    await write(engine, _insert(1))

    results = await asyncio.gather(
        write(engine, _insert(2), isolated=True), write(engine, _insert(1)), return_exceptions=True
    )

    assert isinstance(results[1], IntegrityError)
    if engine.dialect.name == "sqlite":
        # The isolated write's savepoint is inside the group's transaction, so the group's failure undoes it.
        assert isinstance(results[0], IntegrityError)
        assert await _ids(engine) == [1]
    else:
        assert results[0] == 2
        assert await _ids(engine) == [1, 2]


async def test_a_disposed_engine_still_writes(engine: AsyncEngine) -> None:
    await write(engine, _insert(1))
    await engine.dispose()

    await write(engine, _insert(2))

    assert await _ids(engine) == [1, 2]


async def test_write_transactions_beside_groups_all_commit_with_no_update_lost(engine: AsyncEngine) -> None:
    # Each transaction reads, lets the event loop run the others, then writes what it read plus one: on
    # SQLite two of them at once would meet the write lock (a busy wait, or a refused stale snapshot).
    await write(engine, lambda connection: connection.execute(_rows.insert(), {"id": 0, "note": "0"}))
    counter = sa.select(_rows.c.note).where(_rows.c.id == 0).with_for_update()

    async def increment() -> None:
        async with write_transaction(engine) as connection:
            value = int((await connection.execute(counter)).scalar_one())
            await asyncio.sleep(0.001)
            await connection.execute(_rows.update().where(_rows.c.id == 0).values(note=str(value + 1)))

    with_engine = [increment() for _ in range(16)] + [write(engine, _insert(i)) for i in range(1, 17)]
    await asyncio.gather(*with_engine)

    async with engine.connect() as connection:
        assert (await connection.execute(counter.with_for_update(read=True))).scalar_one() == "16"
    assert await _ids(engine) == list(range(17))


async def test_a_write_transaction_that_raises_rolls_back(engine: AsyncEngine) -> None:
    with pytest.raises(RuntimeError, match="undone"):
        async with write_transaction(engine) as connection:
            await connection.execute(_rows.insert(), {"id": 1, "note": "row 1"})
            raise RuntimeError("undone")

    await write(engine, _insert(2))

    assert await _ids(engine) == [2]


async def test_a_write_inside_the_same_tasks_write_transaction_is_refused_on_sqlite_not_a_hang(
    engine: AsyncEngine,
) -> None:
    """On SQLite a task's nested write would wait for its own turn for good; it is refused at once (on
    PostgreSQL it is a second transaction of its own, as it always was)."""
    sqlite = engine.dialect.name == "sqlite"
    async with write_transaction(engine) as connection:
        await connection.execute(_rows.insert(), {"id": 1, "note": "row 1"})
        if sqlite:
            with pytest.raises(RuntimeError, match="would wait for itself"):
                async with asyncio.timeout(5):  # in this task: `wait_for` would run it in another
                    await write(engine, _insert(2))
            with pytest.raises(RuntimeError, match="would wait for itself"):
                async with write_transaction(engine):
                    pass
        else:
            await write(engine, _insert(2))
        # Another task's write waits its turn and commits after this transaction.
        other = asyncio.ensure_future(write(engine, _insert(3)))
        await asyncio.sleep(0.01)
        assert not other.done() or not sqlite

    assert await asyncio.wait_for(other, HANG_S) == 3
    assert await _ids(engine) == ([1, 3] if sqlite else [1, 2, 3])


@pytest.mark.parametrize("url", ["sqlite+aiosqlite://", "sqlite+aiosqlite:///:memory:"])
async def test_an_in_memory_sqlite_database_refuses_writes(url: str) -> None:
    engine = create_engine(url)
    try:
        with pytest.raises(DatabaseUrlError, match="in-memory SQLite database cannot take writes"):
            await write(engine, _insert(1))
    finally:
        await engine.dispose()


async def test_a_write_cancelled_inside_its_statement_leaves_the_database_writable(tmp_path: Path) -> None:
    # A task cancelled while its statement runs (a reconcile pass stopped at shutdown) has its connection
    # invalidated and closed by SQLAlchemy; the interrupted statement kept SQLite's closed connection, and
    # its write lock, alive: the next writer waited out the busy timeout (30 s) and failed, "database is
    # locked". Every other writer must go on at once instead.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'cancelled.db'}")
    entered, release = threading.Event(), threading.Event()

    def gate(_: int) -> int:
        entered.set()
        release.wait(HANG_S)
        return 1

    event.listen(engine.sync_engine, "connect", lambda dbapi, _: dbapi.create_function("gate", 1, gate))
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_rows.metadata.create_all)
        inside = asyncio.Event()

        async def interrupted() -> None:
            async with write_transaction(engine) as connection:
                await connection.execute(_rows.insert(), {"id": 1, "note": "undone"})
                inside.set()
                await connection.execute(sa.text("SELECT gate(1)"))

        task = asyncio.create_task(interrupted())
        await inside.wait()
        # The gate's statement is on the connection's thread, holding it.
        assert await asyncio.to_thread(entered.wait, HANG_S)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

        # With the lock kept, this write fails ("database is locked") after the 30 s busy timeout.
        await asyncio.wait_for(write(engine, _insert(2)), HANG_S)
        assert await _ids(engine) == [2]
    finally:
        release.set()
        await engine.dispose()
