"""Async engine factory: driver selection and per-dialect connection settings."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ._errors import DatabaseUrlError

__all__ = ["DEFAULT_DATABASE_URL", "create_engine", "normalize_url", "printable_url", "sqlite_pragmas"]

# aiosqlite logs every statement with its parameters at DEBUG, and those include the payments a merchant
# keeps (signed authorizations, which anyone could spend): held at INFO, as SQLAlchemy holds its own logger
# at WARNING, unless an operator set it explicitly.
_DRIVER_LOGGERS = ("aiosqlite",)

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./x402.db"

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except (ArgumentError, ValueError) as exc:  # the message would repeat the URL, password included
        raise DatabaseUrlError(
            "is not a database URL: use sqlite+aiosqlite:///path/to/file.db or postgresql://user@host/database"
        ) from exc


def normalize_url(url: str) -> str:
    """Return `url` with the async driver this project uses (`aiosqlite`, `asyncpg`).

    Raises:
        DatabaseUrlError: `url` cannot be parsed or names a database other than SQLite or PostgreSQL.
    """
    parsed = _parse(url)
    backend = parsed.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        raise DatabaseUrlError(
            f"unsupported database URL scheme {parsed.drivername!r}: use sqlite or postgresql"
        )
    return parsed.set(drivername=_ASYNC_DRIVERS[backend]).render_as_string(hide_password=False)


def printable_url(url: str) -> str:
    """`url` as it may be shown in a message or a log line: with its password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "(an unparseable URL)"


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """Create an async engine for `url`, tuned for concurrent use by one or more processes.

    SQLite runs in WAL mode with a busy timeout so readers never block the writer and concurrent writers
    wait instead of failing; PostgreSQL gets a pool sized for a busy single worker that never hands out a
    connection the server closed.
    """
    url = normalize_url(url)
    # Statement parameters (signed payments among them) never go into an error message or a log line.
    kwargs.setdefault("hide_parameters", True)
    for name in _DRIVER_LOGGERS:
        driver_logger = logging.getLogger(name)
        if driver_logger.level == logging.NOTSET:
            driver_logger.setLevel(logging.INFO)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_async_engine(url, connect_args={"timeout": 30}, **kwargs)
        event.listen(engine.sync_engine, "connect", sqlite_pragmas)
        event.listen(engine.sync_engine, "invalidate", _roll_back_before_close)
        return engine
    kwargs.setdefault("pool_size", 20)
    kwargs.setdefault("max_overflow", 20)
    engine = create_async_engine(url, **kwargs)
    if not kwargs.get("pool_pre_ping"):
        event.listen(engine.sync_engine, "checkout", _refuse_closed_connection)
    return engine


def _refuse_closed_connection(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Hand out no pooled connection the server has closed (a restart, a terminated backend).

    asyncpg notices the server closing a connection as soon as it happens, so asking it costs nothing,
    where SQLAlchemy's `pool_pre_ping` costs a round trip per checkout: a third of a paid task's database
    round trips. The pool replaces a connection refused here with a new one.
    """
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the server closed this pooled connection")


def _roll_back_before_close(dbapi_connection: Any, _record: Any, _exception: BaseException | None) -> None:
    """End the transaction of a SQLite connection about to be closed because it was invalidated.

    SQLAlchemy invalidates a connection whose task was cancelled inside a statement (a reconcile pass
    stopped at shutdown, say) and closes it. A statement of it still alive then (the cursor of the
    interrupted execute) makes SQLite keep the closed connection as a zombie, its transaction and write
    lock included, until that statement is freed: every other writer of the database waited out its busy
    timeout and failed. A rollback first releases the lock whatever is left behind.
    """
    if _exception is None:
        return  # a plain invalidation (a pool recycle): nothing was interrupted
    with contextlib.suppress(Exception):  # it is being closed anyway; a rollback that fails changes nothing
        dbapi_connection.rollback()


def sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """The settings every connection to a SQLite database gets (the async engine's and the writer's)."""
    cursor = dbapi_connection.cursor()
    # WAL + NORMAL keeps commits durable across process crashes (not power loss) without an fsync per commit.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
