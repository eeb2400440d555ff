"""Alembic runner: upgrade the schema and refuse to run on an outdated one."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

import migrations

from ._engine import create_engine, normalize_url

__all__ = [
    "SchemaOutdatedError",
    "current_revisions",
    "ensure_schema_current",
    "outdated_branches",
    "upgrade_schema",
]


class SchemaOutdatedError(RuntimeError):
    """The database schema is behind the code; run the `db upgrade` command first."""


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


def _branch_head(script: ScriptDirectory, branch: str) -> str:
    return script.get_revision(f"{branch}@head").revision


async def upgrade_schema(url: str, branch: str | None = None) -> None:
    """Upgrade the database at `url` to the newest revision of `branch` (all branches when None).

    Alembic's command API is synchronous and runs its own event loop for the async env, so it runs in a
    worker thread; it is a startup / CLI operation, never part of request handling.
    """
    target = f"{branch}@head" if branch else "heads"
    await asyncio.to_thread(command.upgrade, _config(url), target)


async def current_revisions(engine: AsyncEngine) -> set[str]:
    """The revisions recorded in the database's version table (empty for a fresh database)."""
    async with engine.connect() as connection:
        return set(await connection.run_sync(lambda c: MigrationContext.configure(c).get_current_heads()))


async def ensure_schema_current(url: str, *branches: str) -> None:
    """Raise SchemaOutdatedError unless every named branch is at its head revision."""
    script = ScriptDirectory.from_config(_config(url))
    engine = create_engine(url)
    try:
        applied = await current_revisions(engine)
    finally:
        await engine.dispose()
    for branch in branches:
        head = _branch_head(script, branch)
        if head not in applied:
            raise SchemaOutdatedError(
                f"the database schema for {branch!r} is not at revision {head}; run `db upgrade` first"
            )


async def outdated_branches(engine: AsyncEngine, *branches: str) -> list[str]:
    """Those of `branches` whose head revision the database at `engine` lacks (a readiness check's read)."""
    heads = [
        await asyncio.to_thread(_code_head, branch) for branch in branches
    ]  # files read once, off the loop
    applied = await current_revisions(engine)
    return [branch for branch, head in zip(branches, heads, strict=True) if head not in applied]


@functools.cache
def _code_head(branch: str) -> str:
    """The head revision of `branch` in the migrations shipped with the code."""
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    return _branch_head(ScriptDirectory.from_config(config), branch)
