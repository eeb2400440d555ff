"""`x402-facilitator check` and `serve`'s preflight against the real dev chain: another chain, an unfunded
relayer made now and a claim store never migrated are each a problem; the all-good case passes. The chain
probes `check` and `/readyz` share judge one chain read, made once however many checks look at it. A key
past its budget for reverted settlements is a problem (not fatal), read only from a database at head."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from eth_account import Account

from a2a_x402.devchain import ANVIL_DEV_KEYS, DevChain
from a2a_x402.facilitator import (
    FOREIGN_SETTLEMENTS_COUNTED,
    ChainStatus,
    ChainUnavailableError,
    RelayerStatus,
    network_check,
    read_once,
    relayer_check,
)
from a2a_x402.facilitator._reverts import RevertedSettlement, RevertGuard
from a2a_x402.facilitator.cli import main
from a2a_x402.observability import CheckResult, run_checks
from a2a_x402.storage import create_engine
from tests.fixtures.checks import chain_env, problems, run_check, serve_refused


@pytest.mark.usefixtures("clean_env")
def test_all_good_passes_every_check(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, chain_env(chain, sqlite_url))

    assert (code, problems(rows)) == (0, {})
    assert list(rows) == ["network", "relayer", "database", "access", "foreign settlements", "revert budget"]
    relayer = Account.from_key(chain.relayer_key).address
    assert rows["relayer"][1].startswith(f"{relayer} holds ")
    assert rows["access"][1] == "API keys required for /verify and /settle (`keys create`)"
    assert rows["foreign settlements"] == (
        "ok",
        "refused: a transaction this deployment did not send never counts as a settlement "
        "(X402_COUNT_FOREIGN_SETTLEMENTS)",
    )


@pytest.mark.usefixtures("clean_env")
def test_check_shows_a_public_facilitator(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_FACILITATOR_PUBLIC="true"))

    assert (code, problems(rows)) == (0, {})
    assert rows["access"][1].startswith("public (X402_FACILITATOR_PUBLIC)")


@pytest.mark.usefixtures("clean_env")
def test_counted_foreign_settlements_name_the_database_they_need(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_COUNT_FOREIGN_SETTLEMENTS="true"))

    assert (code, problems(rows)) == (0, {})
    assert rows["foreign settlements"] == ("ok", FOREIGN_SETTLEMENTS_COUNTED)
    assert "every deployment paying to the same payTo must use this database" in FOREIGN_SETTLEMENTS_COUNTED


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


@pytest.mark.usefixtures("clean_env")
def test_checking_a_claim_store_leaves_its_journal_mode_alone(chain: DevChain, sqlite_url: str) -> None:
    # `check` only reads: it must not switch a rollback-journal file to WAL (the service's own pragma).
    path = Path(sqlite_url.split("///", 1)[1])
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode=DELETE")

    code, rows = run_check(main, chain_env(chain, sqlite_url))

    assert (code, problems(rows)) == (0, {})
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert not path.with_name(path.name + "-wal").exists()


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


_RELAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


@pytest.mark.usefixtures("clean_env")
def test_listed_wallet_factories_with_code_pass(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_ERC6492_FACTORIES=chain.wallet_factory))

    assert (code, problems(rows)) == (0, {})
    assert list(rows) == [
        "network",
        "relayer",
        "database",
        "access",
        "erc6492 factories",
        "foreign settlements",
        "revert budget",
    ]
    assert rows["erc6492 factories"] == ("ok", f"{chain.wallet_factory} has code")


@pytest.mark.usefixtures("clean_env")
def test_a_listed_wallet_factory_without_code_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    codeless = Account.create().address
    listed = f"{chain.wallet_factory},{codeless}"

    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_ERC6492_FACTORIES=listed))

    assert code == 1
    assert problems(rows) == {
        "erc6492 factories": f"{codeless} has no code on this chain: check X402_ERC6492_FACTORIES"
    }


def test_serve_refuses_a_listed_wallet_factory_without_code(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    codeless = Account.create().address
    env = chain_env(chain, sqlite_url, X402_PORT="0", X402_ERC6492_FACTORIES=codeless)

    served = serve_refused("x402-facilitator", env, tmp_path)

    assert served.returncode == 2
    assert served.stderr.splitlines() == [
        f"x402-facilitator: not starting: erc6492 factories: {codeless} has no code on this chain: "
        "check X402_ERC6492_FACTORIES"
    ]


async def test_the_chain_and_relayer_checks_share_one_read() -> None:
    reads = 0

    async def read() -> ChainStatus:
        nonlocal reads
        reads += 1
        await asyncio.sleep(0)  # both checks are waiting by now
        relayer = RelayerStatus(_RELAYER, balance_wei=5 * 10**14, next_nonce=0)
        return ChainStatus(chain_id=1, head_block=7, head_timestamp=0, read_at=0.0, relayers=(relayer,))

    shared = read_once(read)
    results = await run_checks(
        [network_check(shared, "eip155:1", name="chain"), relayer_check(shared, 10**15)], timeout_s=5
    )

    assert reads == 1
    assert results == [
        CheckResult("chain", True, "the node serves chain 1, as X402_NETWORK (eip155:1) says; head 7"),
        CheckResult(
            "relayer",
            False,
            f"{_RELAYER} holds 0.0005 ETH, below the floor of 0.001 ETH (X402_RELAYER_MIN_BALANCE_WEI): "
            "send it ETH for gas",
            fatal=False,
        ),
    ]


async def test_a_failed_chain_read_is_one_read_and_fatal_for_both_checks() -> None:
    reads = 0

    async def read() -> ChainStatus:
        nonlocal reads
        reads += 1
        raise ChainUnavailableError("RPC node unreachable: ConnectError")

    shared = read_once(read)
    results = await run_checks([network_check(shared, "eip155:1"), relayer_check(shared, 1)], timeout_s=5)

    assert reads == 1
    assert results == [
        CheckResult("network", False, "the node does not answer: RPC node unreachable: ConnectError"),
        CheckResult(
            "relayer", False, "cannot read the relayers' balances: RPC node unreachable: ConnectError"
        ),
    ]


def _spend_on_reverts(database_url: str, chain_id: int, relayer: str, gas_wei: int) -> None:
    """Record one reverted settlement of `relayer` costing `gas_wei` in the claim store at `database_url`."""

    async def record() -> None:
        engine = create_engine(database_url)
        try:
            guard = RevertGuard(engine, chain_id=chain_id, cooloff_s=3600, code_payers=3, budget_wei=None)
            await guard.record(RevertedSettlement("0x" + "ab" * 32, relayer, _RELAYER, None, gas_wei))
        finally:
            await engine.dispose()

    asyncio.run(record())


@pytest.mark.usefixtures("clean_env")
def test_a_key_past_its_revert_budget_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    relayer = Account.from_key(chain.relayer_key).address
    _spend_on_reverts(sqlite_url, chain.chain_id, relayer, 2 * 10**15)

    within = run_check(main, chain_env(chain, sqlite_url, X402_RELAYER_REVERT_BUDGET_WEI=str(10**16)))
    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_RELAYER_REVERT_BUDGET_WEI=str(10**15)))

    assert (within[0], problems(within[1]), within[1]["revert budget"][0]) == (0, {}, "ok")
    assert code == 1
    assert problems(rows) == {
        "revert budget": f"{relayer} spent 0.002 ETH on reverted settlements in the last hour, its budget of "
        "0.001 ETH an hour (X402_RELAYER_REVERT_BUDGET_WEI): it sends nothing new until they age out"
    }


@pytest.mark.usefixtures("clean_env")
def test_a_listed_token_with_its_domain_passes_showing_code_domain_and_decimals(
    chain: DevChain, sqlite_url: str
) -> None:
    listed = f"{chain.asset.lower()}:{chain.asset_name}:{chain.asset_version}"

    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_ASSETS=listed))

    assert (code, problems(rows)) == (0, {})
    assert list(rows) == [
        "network",
        "relayer",
        "database",
        "access",
        "foreign settlements",
        f"asset {chain.asset}",
        "revert budget",
    ]
    detail = rows[f"asset {chain.asset}"][1]
    assert detail.startswith(f"{chain.asset} has code (")
    assert detail.endswith(
        f"the EIP-712 name {chain.asset_name!r}, the EIP-712 version {chain.asset_version!r}, decimals() 6"
    )


@pytest.mark.usefixtures("clean_env")
def test_a_listed_token_without_a_domain_is_shown_with_its_own(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_ASSETS=f" {chain.asset} ,"))

    assert (code, problems(rows)) == (0, {})
    assert f"the EIP-712 name {chain.asset_name!r}" in rows[f"asset {chain.asset}"][1]


@pytest.mark.usefixtures("clean_env")
def test_a_listed_token_with_another_domain_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_ASSETS=f"{chain.asset}:USD Coin:1"))

    assert code == 1
    assert problems(rows) == {
        f"asset {chain.asset}": f"the EIP-712 name is {chain.asset_name!r} but X402_ASSETS' name is "
        f"'USD Coin'; the EIP-712 version is {chain.asset_version!r} but X402_ASSETS' version is '1'"
    }


@pytest.mark.usefixtures("clean_env")
def test_listed_tokens_without_code_or_that_are_no_token_are_problems(
    chain: DevChain, sqlite_url: str
) -> None:
    codeless = Account.create().address
    listed = f"{chain.asset},{codeless},{chain.wallet_factory}"

    code, rows = run_check(main, chain_env(chain, sqlite_url, X402_ASSETS=listed))

    assert code == 1
    assert problems(rows) == {
        f"asset {codeless}": f"there is no contract at X402_ASSETS {codeless} on {chain.network}: "
        "check the token address",
        f"asset {chain.wallet_factory}": f"{chain.wallet_factory} answers name() or version() with no "
        "string: is it an EIP-3009 token?",
    }
    assert rows[f"asset {chain.asset}"][0] == "ok"


@pytest.mark.usefixtures("clean_env")
def test_serve_refuses_a_listed_token_without_code(chain: DevChain, sqlite_url: str, tmp_path: Path) -> None:
    codeless = Account.create().address
    env = chain_env(chain, sqlite_url, X402_PORT="0", X402_ASSETS=codeless)

    served = serve_refused("x402-facilitator", env, tmp_path)

    assert served.returncode == 2
    assert served.stderr.splitlines() == [
        f"x402-facilitator: not starting: asset {codeless}: there is no contract at X402_ASSETS {codeless} "
        f"on {chain.network}: check the token address"
    ]
