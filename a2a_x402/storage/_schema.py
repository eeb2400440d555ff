"""Alembic runner: upgrade the schema and refuse to run on an outdated one.

Checking the schema changes nothing: a SQLite file that does not exist is not created (it is reported as
not migrated), and an existing one is only read.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from a2a_x402 import migrations

from ._engine import create_engine, normalize_url, printable_url
from ._errors import DatabaseUnavailableError, MissingDatabaseError, SchemaOutdatedError

__all__ = [
    "BranchState",
    "SchemaUpgrade",
    "checking_engine",
    "current_revisions",
    "ensure_schema_current",
    "schema_state",
    "upgrade_schema",
]

_WHAT_TO_DO = "check the URL and that it runs"
"""What an unreachable database's refusal tells the operator to do."""
_CHECK_CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True, slots=True)
class SchemaUpgrade:
    """What `upgrade_schema` did: the revisions it applied (oldest first) and the heads the database is at."""

    applied: tuple[str, ...]
    heads: tuple[str, ...]

    def describe(self) -> str:
        """One line for a person: which revisions were applied, or that there was nothing to apply."""
        heads = ", ".join(self.heads)
        if not self.applied:
            return f"already at head {heads}; nothing to apply"
        return f"applied {', '.join(self.applied)}; now at head {heads}"


@dataclass(frozen=True, slots=True)
class BranchState:
    """Where one migration branch of a database stands: its applied revision (None: none yet) and head."""

    branch: str
    current: str | None
    head: str

    @property
    def at_head(self) -> bool:
        """Whether the branch's newest revision is applied."""
        return self.current == self.head


def _config(url: str) -> Config:
    config = _script_config()
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


def _script_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(_script_config())


def _ancestry(script: ScriptDirectory, revisions: set[str]) -> set[str]:
    """`revisions` and every revision below them."""
    return {
        revision.revision
        for head in revisions
        for revision in script.iterate_revisions(head, "base")
        if revision is not None
    }


def _branch_head(script: ScriptDirectory, branch: str) -> str:
    return script.get_revision(f"{branch}@head").revision


async def upgrade_schema(url: str, branch: str | None = None) -> SchemaUpgrade:
    """Upgrade the database at `url` to the newest revision of `branch` (all branches when None).

    Alembic's command API is synchronous and runs its own event loop for the async env, so it runs in a
    worker thread; it is a startup / CLI operation, never part of request handling.

    Returns:
        The revisions applied, oldest first, and the heads the database is at afterwards.

    Raises:
        DatabaseUrlError: `url` is not a database URL this project supports.
        DatabaseUnavailableError: the database cannot be opened or a migration failed on it.
    """
    config = _config(url)
    script = ScriptDirectory.from_config(config)
    target = f"{branch}@head" if branch else "heads"
    file = _sqlite_file(url)
    if file is not None and not file.parent.is_dir():
        raise DatabaseUnavailableError(
            f"cannot create the database {printable_url(url)}: there is no directory {file.parent}"
        )
    try:
        before = await _revisions_at(url)
        await asyncio.to_thread(command.upgrade, config, target)
        after = await _revisions_at(url)
    except (OSError, SQLAlchemyError) as exc:
        raise DatabaseUnavailableError(
            f"cannot upgrade the database {printable_url(url)}: {_reason(exc)}; {_WHAT_TO_DO}"
        ) from exc
    new = _ancestry(script, after) - _ancestry(script, before)
    # walk_revisions goes from the heads down: reversed, a revision comes after those it builds on.
    applied = tuple(r.revision for r in reversed(list(script.walk_revisions())) if r.revision in new)
    return SchemaUpgrade(applied=applied, heads=tuple(sorted(after)))


async def _revisions_at(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return await current_revisions(engine)
    finally:
        await engine.dispose()


async def current_revisions(engine: AsyncEngine) -> set[str]:
    """The revisions recorded in the database's version table (empty for a fresh database)."""
    async with engine.connect() as connection:
        return set(await connection.run_sync(lambda c: MigrationContext.configure(c).get_current_heads()))


async def schema_state(engine: AsyncEngine, *branches: str) -> tuple[BranchState, ...]:
    """Where each named migration branch of the database behind `engine` stands (reads the version table)."""
    script = await asyncio.to_thread(_scripts)  # the migration files, read once and off the loop
    applied = await current_revisions(engine)
    states = []
    for branch in branches:
        on_branch = {r.revision for r in script.iterate_revisions(f"{branch}@head", "base") if r is not None}
        current = next((revision for revision in applied if revision in on_branch), None)
        states.append(BranchState(branch=branch, current=current, head=_branch_head(script, branch)))
    return tuple(states)


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite database URL, or None for another database (or an in-memory or URI one)."""
    parsed = make_url(normalize_url(url))
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


def checking_engine(url: str) -> AsyncEngine:
    """An engine for a look at the schema: a SQLite file never created, a PostgreSQL connection that gives up
    after a while.

    Raises:
        DatabaseUrlError: `url` is not a database URL this project supports.
        MissingDatabaseError: the SQLite file does not exist.
    """
    parsed = make_url(normalize_url(url))
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(parsed, connect_args={"timeout": _CHECK_CONNECT_TIMEOUT_S})
    path = _sqlite_file(url)
    if path is None:
        return create_async_engine(parsed)
    if not path.is_file():
        raise MissingDatabaseError(str(path))
    # Plain, without the service's pragmas (WAL would convert a file): a reader writes nothing, and the last
    # connection to a WAL database removes its -wal and -shm files on closing (SQLite's read-only mode would
    # leave them behind).
    return create_async_engine(parsed)


async def ensure_schema_current(url: str, *branches: str) -> None:
    """Check that every named branch is at its head revision, changing nothing.

    Raises:
        DatabaseUrlError: `url` is not a database URL this project supports.
        DatabaseUnavailableError: the database cannot be opened (unreachable, refused, not a database).
        SchemaOutdatedError: a branch is behind its head, or the database does not exist.
    """
    script = ScriptDirectory.from_config(_config(url))
    engine = checking_engine(url)
    try:
        applied = await current_revisions(engine)
    except (OSError, SQLAlchemyError) as exc:
        raise DatabaseUnavailableError(
            f"cannot open the database {printable_url(url)}: {_reason(exc)}; {_WHAT_TO_DO}"
        ) from exc
    finally:
        await engine.dispose()
    for branch in branches:
        head = _branch_head(script, branch)
        if head not in applied:
            raise SchemaOutdatedError(
                f"the database {printable_url(url)} has no {branch!r} schema at revision {head}: "
                "run `db upgrade` first"
            )


def _reason(exc: BaseException) -> str:
    """What the driver said, without SQLAlchemy's statement and background link."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip() or type(original).__name__
    return " ".join(text.splitlines()[0].split())
