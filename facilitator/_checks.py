"""The probes both check surfaces share: the database's schema, the node's chain, the relayers' funds; and
the one of the preflight only, the code of the listed ERC-6492 wallet factories.

Each probe is written once and used by `/readyz` (a running service's engine and chain reads) and by
`check` / `serve`'s preflight (a fresh engine from `X402_DATABASE_URL`, a fresh RPC client). The chain
probes judge one `ChainStatus`: a run reads it once (`read_once`), in one JSON-RPC batch for the chain id,
the head and every relayer key's balance, however many checks look at it. Results are
`observability.CheckResult`s; `refuse_on_fatal` is what `serve` does with them. Details never hold a
secret: no key, no RPC URL (it may carry an API key), no database password.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

import cli
from observability import Check, CheckResult
from storage import MissingDatabaseError, checking_engine, printable_url, schema_state

from ._errors import ChainError
from ._probe import ChainStatus, RelayerStatus
from ._rpc import RpcClient
from .wire import chain_id_from_caip2

__all__ = [
    "CHECK_TIMEOUT_S",
    "FOREIGN_SETTLEMENTS_COUNTED",
    "ReadStatus",
    "check_database",
    "check_schema",
    "erc6492_factories_check",
    "foreign_settlements_check",
    "network_check",
    "read_once",
    "refuse_on_fatal",
    "relayer_check",
    "revert_budget_check",
    "schema_check",
]

logger = logging.getLogger(__name__)

CHECK_TIMEOUT_S = 10.0
"""How long one preflight check may take before it counts as a problem (a node or database that does not
answer); `/readyz` keeps to its own, shorter deadline."""

ReadStatus = Callable[[], Awaitable[ChainStatus]]
"""A read of the chain and the relayers (`read_chain_status` bound to a client and the relayer addresses)."""

_WEI_PER_ETH = Decimal(10**18)


def read_once(read: ReadStatus) -> ReadStatus:
    """`read`, done at most once however many checks await it: the first caller reads, the others wait for
    its answer (or its `ChainError`). A read cut by its caller's deadline is left to the next caller."""
    lock = asyncio.Lock()
    found: list[ChainStatus | ChainError] = []

    async def shared() -> ChainStatus:
        async with lock:
            if not found:
                try:
                    found.append(await read())
                except ChainError as exc:
                    found.append(exc)
        answer = found[0]
        if isinstance(answer, ChainError):
            raise answer
        return answer

    return shared


def network_check(read: ReadStatus, network: str, *, name: str = "network") -> Check:
    """`network` (`/readyz` calls it `chain`): the node answers and serves the chain the CAIP-2 id `network`
    names."""

    async def probe() -> CheckResult:
        try:
            status = await read()
        except ChainError as exc:
            return CheckResult.problem(name, f"the node does not answer: {exc}")
        served = status.chain_id
        if served != chain_id_from_caip2(network):
            return CheckResult.problem(
                name, f"the node serves chain {served} (eip155:{served}), but X402_NETWORK is {network}"
            )
        return CheckResult.passed(
            name,
            f"the node serves chain {served}, as X402_NETWORK ({network}) says; head {status.head_block}",
        )

    return Check(name, probe)


def relayer_check(read: ReadStatus, min_balance_wei: int) -> Check:
    """`relayer`: every relayer key `read` reports holds at least `min_balance_wei` to pay gas with.

    One result names every key short of it (a problem, not fatal: the service can serve with the others,
    or once they are funded); balances that cannot be read are fatal (the node does not answer).
    """

    async def probe() -> CheckResult:
        try:
            status = await read()
        except ChainError as exc:
            return CheckResult.problem("relayer", f"cannot read the relayers' balances: {exc}")
        return _funded(status.relayers, min_balance_wei)

    return Check("relayer", probe)


def revert_budget_check(spent: Callable[[], Awaitable[dict[str, int]]], budget_wei: int) -> Check:
    """`revert budget`: no relayer key spent its hourly budget for reverted settlements (`spent()`, wei by
    key). One past it sends nothing new until its reverts age out: a problem, not fatal (the others serve)."""

    async def probe() -> CheckResult:
        try:
            by_key = await spent()
        except (SQLAlchemyError, OSError) as exc:
            return CheckResult.problem(
                "revert budget", f"cannot read the reverted settlements: {_first_line(exc)}"
            )
        budget = f"{_ether(budget_wei)} ETH an hour (X402_RELAYER_REVERT_BUDGET_WEI)"
        over = [f"{key} spent {_ether(wei)} ETH" for key, wei in by_key.items() if wei >= budget_wei]
        if over:
            return CheckResult.problem(
                "revert budget",
                f"{', '.join(over)} on reverted settlements in the last hour, its budget of {budget}: "
                "it sends nothing new until they age out",
                fatal=False,
            )
        most = max(by_key.values(), default=0)
        return CheckResult.passed("revert budget", f"at most {_ether(most)} ETH spent on reverts of {budget}")

    return Check("revert budget", probe)


def _funded(relayers: Sequence[RelayerStatus], min_balance_wei: int) -> CheckResult:
    floor = _ether(min_balance_wei)
    short = [
        f"{r.address} holds {_ether(r.balance_wei)} ETH" for r in relayers if r.balance_wei < min_balance_wei
    ]
    if short:
        them = "it" if len(short) == 1 else "them"
        return CheckResult.problem(
            "relayer",
            f"{', '.join(short)}, below the floor of {floor} ETH (X402_RELAYER_MIN_BALANCE_WEI): "
            f"send {them} ETH for gas",
            fatal=False,
        )
    held = ", ".join(f"{r.address} holds {_ether(r.balance_wei)} ETH" for r in relayers)
    return CheckResult.passed("relayer", f"{held} (floor {floor} ETH)")


FOREIGN_SETTLEMENTS_COUNTED = (
    "X402_COUNT_FOREIGN_SETTLEMENTS is on: a transaction this deployment did not send counts as a "
    "settlement; every deployment paying to the same payTo must use this database, or one authorization "
    "can be delivered and booked twice"
)
"""The one line `serve` logs at start (and `check` shows) while foreign settlements count."""


def foreign_settlements_check(count_foreign: bool) -> Check:
    """What a transaction this deployment did not send means for a presented authorization: refused
    (safe with any number of deployments), or counted (safe only if they share this claim store)."""
    if count_foreign:
        return Check.answered(CheckResult.passed("foreign settlements", FOREIGN_SETTLEMENTS_COUNTED))
    return Check.answered(
        CheckResult.passed(
            "foreign settlements",
            "refused: a transaction this deployment did not send never counts as a settlement "
            "(X402_COUNT_FOREIGN_SETTLEMENTS)",
        )
    )


def erc6492_factories_check(rpc: RpcClient, factories: Sequence[str]) -> Check:
    """`erc6492 factories`: each wallet factory of `X402_ERC6492_FACTORIES` has code (fatal otherwise: an
    address without code is a typo or another chain's, and every wallet deployed through it would fail)."""

    async def probe() -> CheckResult:
        codes = await asyncio.gather(
            *(rpc.call("eth_getCode", factory, "latest") for factory in factories), return_exceptions=True
        )
        problems: list[str] = []
        for factory, code in zip(factories, codes, strict=True):
            if isinstance(code, ChainError):
                problems.append(f"cannot read the code at {factory}: {code}")
            elif isinstance(code, BaseException):
                raise code
            elif not isinstance(code, str) or code in ("0x", "0x0", ""):
                problems.append(f"{factory} has no code on this chain")
        if problems:
            return CheckResult.problem(
                "erc6492 factories", "; ".join(problems) + ": check X402_ERC6492_FACTORIES"
            )
        have = "has" if len(factories) == 1 else "have"
        return CheckResult.passed("erc6492 factories", f"{', '.join(factories)} {have} code")

    return Check("erc6492 factories", probe)


async def check_schema(
    engine: AsyncEngine, *branches: str, upgrade_command: str, where: str | None = None
) -> CheckResult:
    """`database`: the database behind `engine` answers and each migration branch named is at its head.

    `where` names the database in the detail (by default its URL without the password; `/readyz`, served
    without authentication, says only "the database").
    """
    where = where or printable_url(engine.url.render_as_string(hide_password=False))
    try:
        states = await schema_state(engine, *branches)
    except (SQLAlchemyError, OSError) as exc:
        return CheckResult.problem("database", f"cannot read {where}: {_first_line(exc)}")
    behind = [state for state in states if not state.at_head]
    if behind:
        lag = "; ".join(
            f"{state.branch} at {state.current or 'no revision'}, head {state.head}" for state in behind
        )
        return CheckResult.problem("database", f"{where} is not migrated ({lag}): run `{upgrade_command}`")
    heads = ", ".join(state.head for state in states)
    return CheckResult.passed("database", f"{where} is at head ({heads})")


def schema_check(
    engine: AsyncEngine, *branches: str, upgrade_command: str, where: str | None = None
) -> Check:
    """`check_schema` as a `Check` (what `/readyz` runs on a service's own engine)."""
    return Check(
        "database", lambda: check_schema(engine, *branches, upgrade_command=upgrade_command, where=where)
    )


async def check_database(url: str, *branches: str, upgrade_command: str) -> CheckResult:
    """`database`, from a URL: `check_schema` on `storage.checking_engine` (a missing SQLite file is never
    created, the service's pragmas are not applied, a PostgreSQL connection gives up after a while)."""
    try:
        engine = await asyncio.to_thread(checking_engine, url)
    except MissingDatabaseError as missing:
        detail = f"there is no database at {missing.path}: run `{upgrade_command}`"
        return CheckResult.problem("database", detail)
    except (ValueError, SQLAlchemyError) as exc:
        return CheckResult.problem("database", f"X402_DATABASE_URL is not usable: {_first_line(exc)}")
    try:
        return await check_schema(engine, *branches, upgrade_command=upgrade_command)
    finally:
        await engine.dispose()


def refuse_on_fatal(results: Sequence[CheckResult]) -> None:
    """What `serve` does with its checks: warn of each problem that is not fatal, refuse to start on the rest.

    Raises:
        cli.ConfigError: listing every fatal problem in one line (the command's exit status 2).
    """
    fatal = [result for result in results if not result.ok and result.fatal]
    if fatal:
        raise cli.ConfigError(
            "not starting: " + "; ".join(f"{result.name}: {result.detail}" for result in fatal)
        )
    for result in results:
        if not result.ok:
            logger.warning("check %s: %s", result.name, result.detail)


def _ether(wei: int) -> str:
    text = format(Decimal(wei) / _WEI_PER_ETH, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _first_line(exc: BaseException) -> str:
    """An exception's message without SQLAlchemy's SQL echo and background links (first line only)."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__
