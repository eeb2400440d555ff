"""`x402-facilitator check` and `serve`'s preflight against the real dev chain: another chain, an unfunded
relayer made now and a claim store never migrated are each a problem; the all-good case passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account

from devchain import ANVIL_DEV_KEYS, DevChain
from facilitator.cli import main
from tests.fixtures.checks import chain_env, problems, run_check, serve_refused


@pytest.mark.usefixtures("clean_env")
def test_all_good_passes_every_check(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, chain_env(chain, sqlite_url))

    assert (code, problems(rows)) == (0, {})
    assert list(rows) == ["network", "relayer", "database"]
    relayer = Account.from_key(chain.relayer_key).address
    assert rows["relayer"][1].startswith(f"{relayer} holds ")


@pytest.mark.usefixtures("clean_env")
def test_another_chain_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_NETWORK="eip155:10"))

    assert code == 1
    assert problems(rows) == {
        "network": f"the node serves chain {chain.chain_id} ({chain.network}), but X402_NETWORK is eip155:10"
    }


@pytest.mark.usefixtures("clean_env")
def test_an_unfunded_relayer_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    relayer = Account.create()

    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_RELAYER_KEY=relayer.key.to_0x_hex()))

    assert code == 1
    assert list(problems(rows)) == ["relayer"]
    assert problems(rows)["relayer"].startswith(f"{relayer.address} holds 0 ETH, below the floor")


@pytest.mark.usefixtures("clean_env")
def test_every_key_of_the_relayer_pool_is_checked(chain: DevChain, sqlite_url: str) -> None:
    unfunded = [Account.create(), Account.create()]
    pool = ",".join(account.key.to_0x_hex() for account in unfunded)

    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_RELAYER_KEYS=pool))

    assert code == 1
    assert list(problems(rows)) == ["relayer"]
    short = ", ".join(f"{account.address} holds 0 ETH" for account in unfunded)
    assert problems(rows)["relayer"] == (
        f"{short}, below the floor of 0.001 ETH (X402_RELAYER_MIN_BALANCE_WEI): send them ETH for gas"
    )
    # The funded key of X402_RELAYER_KEY is not a problem, and no key is shown.
    assert Account.from_key(chain.relayer_key).address not in rows["relayer"][1]
    for key in (chain.relayer_key, *(account.key.to_0x_hex() for account in unfunded)):
        assert key[2:10] not in rows["relayer"][1]


@pytest.mark.usefixtures("clean_env")
def test_a_funded_relayer_pool_passes_naming_every_key(chain: DevChain, sqlite_url: str) -> None:
    pool = [ANVIL_DEV_KEYS[1], ANVIL_DEV_KEYS[2]]

    env = chain_env(chain, sqlite_url, X402_RELAYER_KEYS=",".join(pool))
    del env["X402_RELAYER_KEY"]

    code, rows = run_check(main, env)

    assert (code, problems(rows)) == (0, {})
    detail = rows["relayer"][1]
    addresses = [Account.from_key(key).address for key in pool]
    assert detail.startswith(f"{addresses[0]} holds "), detail
    assert f", {addresses[1]} holds " in detail and detail.endswith("(floor 0.001 ETH)"), detail


@pytest.mark.usefixtures("clean_env")
def test_an_unmigrated_claim_store_is_a_problem_and_is_not_created(chain: DevChain, tmp_path: Path) -> None:
    path = tmp_path / "claims.db"

    code, rows = run_check(main, chain_env(chain, f"sqlite+aiosqlite:///{path}"))

    assert code == 1
    assert problems(rows) == {
        "database": f"there is no database at {path}: run `x402-facilitator db upgrade`"
    }
    assert not path.exists()


def test_serve_refuses_an_unmigrated_claim_store_in_one_line(chain: DevChain, tmp_path: Path) -> None:
    path = tmp_path / "claims.db"
    env = chain_env(chain, f"sqlite+aiosqlite:///{path}", X402_PORT="0")

    served = serve_refused("x402-facilitator", env, tmp_path)

    assert served.returncode == 2
    assert served.stderr.splitlines() == [
        f"x402-facilitator: not starting: database: there is no database at {path}: "
        "run `x402-facilitator db upgrade`"
    ]
    assert not path.exists()
