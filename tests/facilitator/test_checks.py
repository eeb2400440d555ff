"""`x402-facilitator check` and `serve`'s preflight against the real dev chain: another chain, an unfunded
relayer made now and a claim store never migrated are each a problem; the all-good case passes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from eth_account import Account

from devchain import DevChain
from facilitator.cli import main

_REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No X402_* variable of the test run, and a working directory without a `.env`."""
    for name in list(os.environ):
        if name.startswith("X402_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def _env(chain: DevChain, database_url: str, **overrides: str) -> dict[str, str]:
    return {
        "X402_RPC_URL": chain.rpc_url,
        "X402_NETWORK": chain.network,
        "X402_RELAYER_KEY": chain.relayer_key,
        "X402_DATABASE_URL": database_url,
        **overrides,
    }


def _check(env: dict[str, str]) -> tuple[int, dict[str, tuple[str, str]]]:
    outcome = CliRunner().invoke(main, ["check"], env=env, catch_exceptions=False)
    header, *lines = outcome.output.splitlines()
    assert header.split() == ["check", "result", "detail"], outcome.output
    rows = {}
    for line in lines:
        name, result, detail = line.split(maxsplit=2)
        rows[name] = (result, detail)
    return outcome.exit_code, rows


def _problems(rows: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {name: detail for name, (result, detail) in rows.items() if result == "problem"}


@pytest.mark.usefixtures("clean_env")
def test_all_good_passes_every_check(chain: DevChain, sqlite_url: str) -> None:
    code, rows = _check(_env(chain, sqlite_url))

    assert (code, _problems(rows)) == (0, {})
    assert list(rows) == ["network", "relayer", "database"]
    relayer = Account.from_key(chain.relayer_key).address
    assert rows["relayer"][1].startswith(f"{relayer} holds ")


@pytest.mark.usefixtures("clean_env")
def test_another_chain_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    code, rows = _check(_env(chain, sqlite_url, X402_NETWORK="eip155:10"))

    assert code == 1
    assert _problems(rows) == {
        "network": f"the node serves chain {chain.chain_id} ({chain.network}), but X402_NETWORK is eip155:10"
    }


@pytest.mark.usefixtures("clean_env")
def test_an_unfunded_relayer_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    relayer = Account.create()

    code, rows = _check(_env(chain, sqlite_url, X402_RELAYER_KEY=relayer.key.to_0x_hex()))

    assert code == 1
    assert list(_problems(rows)) == ["relayer"]
    assert _problems(rows)["relayer"].startswith(f"{relayer.address} holds 0 ETH, below the floor")


@pytest.mark.usefixtures("clean_env")
def test_an_unmigrated_claim_store_is_a_problem_and_is_not_created(chain: DevChain, tmp_path: Path) -> None:
    path = tmp_path / "claims.db"

    code, rows = _check(_env(chain, f"sqlite+aiosqlite:///{path}"))

    assert code == 1
    assert _problems(rows) == {
        "database": f"there is no database at {path}: run `x402-facilitator db upgrade`"
    }
    assert not path.exists()


def test_serve_refuses_an_unmigrated_claim_store_in_one_line(chain: DevChain, tmp_path: Path) -> None:
    path = tmp_path / "claims.db"
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("X402_")},
        "PYTHONPATH": str(_REPO_ROOT),
        **_env(chain, f"sqlite+aiosqlite:///{path}", X402_PORT="0"),
    }

    served = subprocess.run(  # noqa: S603 - the project's own console script
        [str(Path(sys.executable).with_name("x402-facilitator")), "serve"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert served.returncode == 2
    assert served.stderr.splitlines() == [
        f"x402-facilitator: not starting: database: there is no database at {path}: "
        "run `x402-facilitator db upgrade`"
    ]
    assert not path.exists()
