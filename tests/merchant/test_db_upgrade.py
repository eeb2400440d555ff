"""`x402-merchant db upgrade` says what it did: the revisions it applied to a fresh database, or that an
up-to-date one is already at head; a database password never shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory

from a2a_x402 import migrations
from a2a_x402.storage import upgrade_schema

_REPO_ROOT = Path(__file__).resolve().parents[2]


def _branch(name: str) -> list[str]:
    """The revisions of migration branch `name`, oldest first (read from the migrations themselves)."""
    script = ScriptDirectory(str(Path(migrations.__file__).parent))
    return [r.revision for r in reversed(list(script.iterate_revisions(f"{name}@head", "base"))) if r]


def _heads() -> str:
    return f"{_branch('facilitator')[-1]}, {_branch('merchant')[-1]}"


def _upgrade(database_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("X402_")}
    return subprocess.run(  # noqa: S603 - the project's own console script
        [str(Path(sys.executable).with_name("x402-merchant")), "db", "upgrade"],
        env={**env, "PYTHONPATH": str(_REPO_ROOT), "X402_DATABASE_URL": database_url},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_fresh_database_gets_every_revision_and_then_nothing(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'x402.db'}"

    fresh = _upgrade(url, tmp_path)
    again = _upgrade(url, tmp_path)

    assert fresh.returncode == 0, fresh.stderr
    said = re.fullmatch(rf"schema in {re.escape(url)}: applied (.+); now at head {_heads()}\n", fresh.stdout)
    assert said, fresh.stdout
    applied = said[1].split(", ")
    # Every revision once, each branch's in the order they build on one another.
    assert sorted(applied) == sorted(_branch("facilitator") + _branch("merchant"))
    for branch in ("facilitator", "merchant"):
        assert [revision for revision in applied if revision in _branch(branch)] == _branch(branch)
    assert (again.returncode, again.stdout) == (
        0,
        f"schema in {url}: already at head {_heads()}; nothing to apply\n",
    )


async def test_a_partly_migrated_database_gets_the_rest(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'x402.db'}"
    first = await upgrade_schema(url, "facilitator")

    rest = await upgrade_schema(url)

    facilitator, merchant = _branch("facilitator"), _branch("merchant")
    assert (first.applied, first.heads) == (tuple(facilitator), (facilitator[-1],))
    assert (rest.applied, rest.heads) == (tuple(merchant), (facilitator[-1], merchant[-1]))


def test_an_up_to_date_postgresql_database_and_no_password_shown(postgres_url: str, tmp_path: Path) -> None:
    # The server trusts loopback, so any password connects; it must still never be printed.
    with_password = postgres_url.replace("postgres@", "postgres:hunter2-not-shown@")

    again = _upgrade(with_password, tmp_path)

    assert again.returncode == 0, again.stderr
    assert again.stdout == (
        f"schema in {with_password.replace('hunter2-not-shown', '***')}: already at head {_heads()}; "
        "nothing to apply\n"
    )
