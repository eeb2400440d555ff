"""The facilitator's checks, composed for its two surfaces from the shared probes of `_checks`.

`facilitator_checks`: what `/readyz` runs at each request on the running service (its claim store's
engine; its node and every relayer key of the pool, read in one batch). `check_facilitator`: what
`x402-facilitator check` prints and `serve` refuses on, for a configuration, with a fresh engine and RPC
client: `network`, `relayer` (every key of `X402_RELAYER_KEY` and `X402_RELAYER_KEYS`: any replica may
lease any of them), `database`, `erc6492 factories` when `X402_ERC6492_FACTORIES` lists any, an
`asset <address>` per token of `X402_ASSETS` (code, EIP-712 domain and decimals), and `revert budget` when
`X402_RELAYER_REVERT_BUDGET_WEI` is set (each key's spending on reverted settlements in the last hour against
it; read only from a database at head; `/readyz` judges it as the pool does).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

from eth_account import Account

from a2a_x402.observability import Check, CheckResult, run_checks
from a2a_x402.storage import checking_engine

from ._checks import (
    CHECK_TIMEOUT_S,
    assets_check,
    check_database,
    erc6492_factories_check,
    foreign_settlements_check,
    network_check,
    read_once,
    relayer_check,
    revert_budget_check,
    schema_check,
)
from ._config import FacilitatorSettings
from ._probe import read_chain_status
from ._reverts import read_spent
from ._rpc import RpcClient
from ._service import Facilitator

__all__ = ["check_facilitator", "facilitator_checks", "relayer_revert_checks", "stored_revert_budget_check"]

_UPGRADE = "x402-facilitator db upgrade"


def facilitator_checks(facilitator: Facilitator, *, min_balance_wei: int) -> list[Check]:
    """The facilitator service's readiness, for one `/readyz` request: claim store, chain, relayer."""
    read = read_once(facilitator.chain_status)
    checks = [
        schema_check(facilitator.engine, "facilitator", upgrade_command=_UPGRADE, where="the database"),
        network_check(read, facilitator.network, name="chain"),
        relayer_check(read, min_balance_wei),
    ]
    return checks + relayer_revert_checks(facilitator)


def relayer_revert_checks(facilitator: Facilitator) -> list[Check]:
    """`revert budget` of a running `facilitator` (none without a budget): for its `/readyz`, and the
    merchant's with an in-process facilitator."""
    guard = facilitator.revert_guard
    if guard.budget_wei is None:
        return []
    spent = partial(guard.current_spent, facilitator.relayer_addresses)
    return [revert_budget_check(spent, guard.budget_wei)]


def stored_revert_budget_check(
    database_url: str, chain_id: int, relayers: Sequence[str], budget_wei: int
) -> Check:
    """`revert budget` read from the claim store at `database_url` (never created when missing), for
    `check`: the facilitator's, and the merchant's with an in-process facilitator."""
    return revert_budget_check(partial(_spent_in, database_url, chain_id, list(relayers)), budget_wei)


def _access(settings: FacilitatorSettings) -> CheckResult:
    """`access`: who /verify and /settle serve (never a problem: either is a choice)."""
    if settings.facilitator_public:
        return CheckResult.passed(
            "access", "public (X402_FACILITATOR_PUBLIC): callers without an API key are served too"
        )
    return CheckResult.passed("access", "API keys required for /verify and /settle (`keys create`)")


async def check_facilitator(settings: FacilitatorSettings) -> list[CheckResult]:
    """Every check of a facilitator configured by `settings`: network, relayer, database, and the wallet
    factories and tokens when any are listed."""
    rpc = RpcClient(settings.rpc_url, timeout_s=settings.rpc_timeout_s)
    try:
        unusable: str | None = None
        try:
            # A key given as a file path is read from disk: off the event loop.
            keys = await asyncio.to_thread(settings.relayer_private_keys)
        except ValueError as exc:
            keys, unusable = [], str(exc)
        read = read_once(partial(read_chain_status, rpc, [Account.from_key(key).address for key in keys]))
        relayer = relayer_check(read, settings.relayer_min_balance_wei)
        if unusable is not None:
            relayer = Check.answered(CheckResult.problem("relayer", unusable))
        database = partial(check_database, settings.database_url, "facilitator", upgrade_command=_UPGRADE)
        checks = [
            network_check(read, settings.network),
            relayer,
            Check("database", database),
            Check.answered(_access(settings)),
        ]
        if settings.erc6492_factory_addresses:
            checks.append(erc6492_factories_check(rpc, settings.erc6492_factory_addresses))
        checks.append(foreign_settlements_check(settings.count_foreign_settlements))
        checks += [
            assets_check(rpc, asset.address, settings.network, asset.name, asset.version)
            for asset in settings.asset_list
        ]
        results = await run_checks(checks, timeout_s=CHECK_TIMEOUT_S)
        budget = settings.relayer_revert_budget_wei
        database_ok = all(result.ok for result in results if result.name == "database")
        # Read only from a database at head: one that is not says so in its own check.
        if budget is not None and keys and database_ok:
            addresses = [Account.from_key(key).address for key in keys]
            stored = stored_revert_budget_check(settings.database_url, settings.chain_id, addresses, budget)
            results += await run_checks([stored], timeout_s=CHECK_TIMEOUT_S)
        return results
    finally:
        await rpc.aclose()


async def _spent_in(url: str, chain_id: int, relayers: list[str]) -> dict[str, int]:
    """`read_spent` on a `checking_engine` of `url` (a missing SQLite file is never created)."""
    engine = await asyncio.to_thread(checking_engine, url)
    try:
        return await read_spent(engine, chain_id, relayers)
    finally:
        await engine.dispose()
