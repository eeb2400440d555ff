"""Alembic runner: upgrade the schema and refuse to run on an outdated one."""

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
from sqlalchemy.ext.asyncio import AsyncEngine

import migrations

from ._engine import create_engine, normalize_url

__all__ = [
    "BranchState",
    "SchemaOutdatedError",
    "SchemaUpgrade",
    "current_revisions",
    "ensure_schema_current",
    "outdated_branches",
    "printable_url",
    "schema_state",
    "upgrade_schema",
]


class SchemaOutdatedError(RuntimeError):
    """The database schema is behind the code; run the `db upgrade` command first."""


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


def printable_url(url: str) -> str:
    """`url` fit for output: any password in it replaced by `***`."""
    return make_url(url).render_as_string(hide_password=True)


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
    """
    config = _config(url)
    script = ScriptDirectory.from_config(config)
    target = f"{branch}@head" if branch else "heads"
    before = await _revisions_at(url)
    await asyncio.to_thread(command.upgrade, config, target)
    after = await _revisions_at(url)
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
