"""Async engine factory: driver selection and per-dialect connection settings."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

__all__ = ["DEFAULT_DATABASE_URL", "create_engine", "normalize_url"]

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./x402.db"

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def normalize_url(url: str) -> str:
    """Return `url` with the async driver this project uses (`aiosqlite`, `asyncpg`)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        raise ValueError(f"unsupported database URL scheme {parsed.drivername!r}: use sqlite or postgresql")
    return parsed.set(drivername=_ASYNC_DRIVERS[backend]).render_as_string(hide_password=False)


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """Create an async engine for `url`, tuned for concurrent use by one or more processes.

    SQLite runs in WAL mode with a busy timeout so readers never block the writer and concurrent writers
    wait instead of failing; PostgreSQL gets a pool sized for a busy single worker.
    """
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_async_engine(url, connect_args={"timeout": 30}, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    kwargs.setdefault("pool_size", 20)
    kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(url, **kwargs)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL + NORMAL keeps commits durable across process crashes (not power loss) without an fsync per commit.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
