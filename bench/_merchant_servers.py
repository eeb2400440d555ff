"""The merchant benchmark's servers and databases.

The paid flow runs on the reference merchant as its operators run it: ``x402-merchant serve`` (one uvicorn
worker, in-process facilitator) in a process of its own, on a database migrated with ``x402-merchant db
upgrade``. The baseline is ``bench._merchant_bare_app`` under the uvicorn CLI with the same server settings.
Both run in the work directory with every inherited ``X402_*`` variable removed, so neither a ``.env`` file
nor the caller's environment changes what is measured.

Every segment gets a fresh database: a copy of a migrated SQLite template file, or a PostgreSQL database
created from a migrated template database (``CREATE DATABASE ... TEMPLATE``, much faster than migrating
again). Every PostgreSQL database made here is dropped when the `Databases` context closes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from a2a_x402.merchant.ledger import LedgerReader
from a2a_x402.merchant.tenants import DEFAULT_TENANT
from a2a_x402.storage import create_engine

from ._chain import BenchChain, process_cpu_s
from ._merchant_bare_app import DATABASE_URL_ENV
from ._servers import ServerProcess, free_port, spawn_server

__all__ = [
    "POSTGRES_SERVER_URL",
    "Backend",
    "Databases",
    "LedgerTotals",
    "ledger_totals",
    "postgres_backend_cpu",
    "postgres_version",
    "start_bare",
    "start_merchant",
]

POSTGRES_SERVER_URL = "postgresql://postgres@127.0.0.1:5432"
_POSTGRES_ADMIN_URL = f"{POSTGRES_SERVER_URL}/postgres"
_REPO_ROOT = Path(__file__).resolve().parent.parent
_BIN = Path(sys.executable).parent


class Backend(StrEnum):
    """Where the merchant keeps its tasks, offers, ledger and claims."""

    POSTGRESQL = "PostgreSQL"
    SQLITE = "SQLite"


def _clean_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("X402_")}


async def _postgres_admin(statement: str, **parameters: str) -> list[Any]:
    """Run `statement` on the server's `postgres` database, autocommit, and return the first column."""
    # CREATE / DROP DATABASE cannot run inside a transaction.
    engine = create_engine(_POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            result = await connection.execute(sa.text(statement), parameters)
            return list(result.scalars()) if result.returns_rows else []
    finally:
        await engine.dispose()


def _migrate(database_url: str, workdir: Path) -> None:
    env = {**_clean_environment(), "X402_DATABASE_URL": database_url}
    subprocess.run(  # noqa: S603 - fixed executable from this virtualenv, no shell
        [str(_BIN / "x402-merchant"), "db", "upgrade"], cwd=workdir, env=env, check=True, capture_output=True
    )


class Databases:
    """Fresh migrated databases per segment, on SQLite and PostgreSQL; a context manager that drops them."""

    def __init__(self, workdir: Path, backends: tuple[Backend, ...]) -> None:
        self._workdir = workdir
        self._backends = backends
        self._sqlite_template = workdir / "merchant-template.db"
        self._postgres_template = f"x402_bench_template_{uuid.uuid4().hex[:12]}"
        self._postgres_made: list[str] = []

    def __enter__(self) -> Databases:
        """Migrate one template database per backend with ``x402-merchant db upgrade``."""
        try:
            if Backend.SQLITE in self._backends:
                _migrate(f"sqlite+aiosqlite:///{self._sqlite_template}", self._workdir)
            if Backend.POSTGRESQL in self._backends:
                asyncio.run(_postgres_admin(f'CREATE DATABASE "{self._postgres_template}"'))
                self._postgres_made.append(self._postgres_template)
                _migrate(f"{POSTGRES_SERVER_URL}/{self._postgres_template}", self._workdir)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    def fresh(self, backend: Backend, tag: str) -> str:
        """The URL of a new database of `backend`, migrated to every head, for one segment."""
        if backend is Backend.SQLITE:
            path = self._workdir / f"merchant-{tag}.db"
            shutil.copyfile(self._sqlite_template, path)
            return f"sqlite+aiosqlite:///{path}"
        name = f"x402_bench_{uuid.uuid4().hex[:16]}"
        asyncio.run(_postgres_admin(f'CREATE DATABASE "{name}" TEMPLATE "{self._postgres_template}"'))
        self._postgres_made.append(name)
        return f"{POSTGRES_SERVER_URL}/{name}"

    def close(self) -> None:
        """Drop every PostgreSQL database made here (SQLite files go with the work directory)."""
        while self._postgres_made:
            name = self._postgres_made.pop()
            # FORCE: a server that did not stop cleanly must not keep the database alive.
            asyncio.run(_postgres_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@dataclass(frozen=True, slots=True)
class LedgerTotals:
    """The default tenant's revenue postings: how many settlement credits, and their sum in atomic units."""

    credits: int
    credited_atomic: int


async def _read_ledger(database_url: str) -> LedgerTotals:
    engine = create_engine(database_url)
    try:
        lines = await LedgerReader(engine).statement(DEFAULT_TENANT)
    finally:
        await engine.dispose()
    credits = [line.amount for line in lines if line.direction == "credit"]
    return LedgerTotals(credits=len(credits), credited_atomic=sum(credits))


def ledger_totals(database_url: str) -> LedgerTotals:
    """What the merchant's ledger in `database_url` has booked for the default tenant so far."""
    return asyncio.run(_read_ledger(database_url))


def postgres_version() -> str:
    """The PostgreSQL server's version."""
    return str(asyncio.run(_postgres_admin("SHOW server_version"))[0])


def postgres_backend_cpu(database_url: str) -> dict[int, float] | None:
    """CPU seconds so far of each PostgreSQL backend serving the database of `database_url`, by pid.

    Only that database's backends count, so other users of the shared PostgreSQL server do not; None when
    the server's processes are not visible in this machine's /proc.
    """
    database = make_url(database_url).database or ""
    pids = asyncio.run(
        _postgres_admin("SELECT pid FROM pg_stat_activity WHERE datname = :name", name=database)
    )
    usage = {}
    for pid in pids:
        cpu = process_cpu_s(pid)
        if cpu is None:
            return None
        usage[int(pid)] = cpu
    return usage


def start_merchant(
    chain: BenchChain, *, database_url: str, price_atomic: int, workdir: Path, tag: str
) -> ServerProcess:
    """Start ``x402-merchant serve`` (SQLite or PostgreSQL, in-process facilitator) and wait until ready.

    The settings are the demo's: the chain's token, its relayer, one default tenant paid to the bench
    payee at `price_atomic`, no card signing keys.
    """
    port = free_port()
    devchain = chain.chain
    env = {
        **_clean_environment(),
        "X402_DATABASE_URL": database_url,
        "X402_RPC_URL": devchain.rpc_url,
        "X402_NETWORK": devchain.network,
        "X402_ASSET": devchain.asset,
        "X402_ASSET_NAME": devchain.asset_name,
        "X402_ASSET_VERSION": devchain.asset_version,
        "X402_RELAYER_KEY": devchain.relayer_key,
        "X402_PAY_TO": chain.pay_to,
        "X402_PRICE": str(price_atomic),
        "X402_HOST": "127.0.0.1",
        "X402_PORT": str(port),
    }
    command = [str(_BIN / "x402-merchant"), "serve", "--port", str(port)]
    return spawn_server(f"merchant[{tag}]", command, env, workdir, workdir / f"merchant-{tag}.log", port)


def start_bare(*, database_url: str | None, workdir: Path, tag: str) -> ServerProcess:
    """Start the bare a2a-sdk app under uvicorn (one worker, no access log) and wait until ready.

    Tasks go to `database_url` (a migrated database) or, when it is None, stay in memory.
    """
    port = free_port()
    env = {
        **_clean_environment(),
        "PYTHONPATH": str(_REPO_ROOT),
        DATABASE_URL_ENV: database_url or "",
    }
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "bench._merchant_bare_app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    return spawn_server(f"bare[{tag}]", command, env, workdir, workdir / f"bare-{tag}.log", port)
