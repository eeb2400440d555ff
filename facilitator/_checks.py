"""Preflight checks: the configuration against the real node and database, without serving.

Each check is a small async function that returns a `CheckResult` named after what it checks (`network`,
`relayer`, `database`, ...), so `check` commands, `serve` (which refuses to start on a fatal problem) and a
readiness probe can all run the same ones. A check catches the failures it expects (an unreachable node, a
missing database) and reports them as a problem; `run_checks` runs several at once, each within
`CHECK_TIMEOUT_S`, and turns anything else a check raises into a problem too, so one broken dependency
never hides the others' results. Details never hold a secret: no key, no RPC URL (it may carry an API
key), no database password.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from eth_account import Account
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

import cli
from storage import create_engine, printable_url, schema_state

from ._config import FacilitatorSettings
from ._errors import ChainError
from ._rpc import RpcClient

__all__ = [
    "CHECK_TIMEOUT_S",
    "CheckResult",
    "check_database",
    "check_facilitator",
    "check_network",
    "check_relayer_funded",
    "check_schema",
    "refuse_on_fatal",
    "render_checks",
    "run_checks",
]

logger = logging.getLogger(__name__)

CHECK_TIMEOUT_S = 10.0
"""How long one check may take before it counts as a problem (a node or database that does not answer)."""

_WEI_PER_ETH = Decimal(10**18)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check: `ok`, or a problem described in `detail` (one line, no secret).

    `fatal` says whether a service must refuse to start on the problem; a non-fatal one (a relayer low on
    gas money) is worth fixing but the service can still serve.
    """

    name: str
    ok: bool
    detail: str
    fatal: bool = True

    @classmethod
    def passed(cls, name: str, detail: str) -> CheckResult:
        """A check that found nothing wrong."""
        return cls(name=name, ok=True, detail=detail)

    @classmethod
    def problem(cls, name: str, detail: str, *, fatal: bool = True) -> CheckResult:
        """A check that found a problem."""
        return cls(name=name, ok=False, detail=detail, fatal=fatal)


async def run_checks(
    checks: Mapping[str, Awaitable[CheckResult]], *, timeout_s: float = CHECK_TIMEOUT_S
) -> list[CheckResult]:
    """Run `checks` (name → the check's coroutine) concurrently; their results in the order given.

    A check that takes longer than `timeout_s` or raises is a (fatal) problem under its name.
    """

    async def bounded(name: str, check: Awaitable[CheckResult]) -> CheckResult:
        try:
            async with asyncio.timeout(timeout_s):
                return await check
        except TimeoutError:
            return CheckResult.problem(name, f"no answer within {timeout_s:g} s")
        except Exception as exc:  # a check that breaks must not hide the others' results
            return CheckResult.problem(name, f"{type(exc).__name__}: {_first_line(exc)}")

    return list(await asyncio.gather(*(bounded(name, check) for name, check in checks.items())))


def render_checks(results: Sequence[CheckResult]) -> str:
    """The results as a table: one line per check with its name, `ok` or `problem`, and the detail."""
    rows = [("check", "result", "detail")] + [
        (result.name, "ok" if result.ok else "problem", result.detail) for result in results
    ]
    name_width = max(len(row[0]) for row in rows)
    status_width = max(len(row[1]) for row in rows)
    return "\n".join(
        f"{name:<{name_width}}  {status:<{status_width}}  {detail}".rstrip() for name, status, detail in rows
    )


async def check_network(rpc: RpcClient, network: str) -> CheckResult:
    """`network`: the node answers and serves the chain the CAIP-2 id `network` names."""
    try:
        served = int(await rpc.call("eth_chainId"), 16)
    except ChainError as exc:
        return CheckResult.problem("network", f"the node does not answer: {exc}")
    expected = int(network.split(":", 1)[1])
    if served != expected:
        return CheckResult.problem(
            "network", f"the node serves chain {served} (eip155:{served}), but X402_NETWORK is {network}"
        )
    return CheckResult.passed("network", f"the node serves chain {served}, as X402_NETWORK ({network}) says")


async def check_relayer_funded(rpc: RpcClient, address: str, min_balance_wei: int) -> CheckResult:
    """`relayer`: the relayer holds at least `min_balance_wei` to pay gas with (a problem, not fatal)."""
    return await _check_relayers_funded(rpc, [address], min_balance_wei)


async def _check_relayers_funded(
    rpc: RpcClient, addresses: Sequence[str], min_balance_wei: int
) -> CheckResult:
    """`relayer`: each of `addresses` holds at least `min_balance_wei`. One row names every key short of it
    (a problem, not fatal) and every key whose balance cannot be read (fatal: the node does not answer)."""
    read = await asyncio.gather(*(_balance(rpc, address) for address in addresses), return_exceptions=True)
    unread: list[str] = []
    short: list[str] = []
    held: list[str] = []
    for address, balance in zip(addresses, read, strict=True):
        if isinstance(balance, ChainError):
            unread.append(f"cannot read the balance of {address}: {balance}")
        elif isinstance(balance, BaseException):
            raise balance
        elif balance < min_balance_wei:
            short.append(f"{address} holds {_ether(balance)} ETH")
        else:
            held.append(f"{address} holds {_ether(balance)} ETH")
    floor = _ether(min_balance_wei)
    problems = list(unread)
    if short:
        them = "it" if len(short) == 1 else "them"
        problems.append(
            f"{', '.join(short)}, below the floor of {floor} ETH (X402_RELAYER_MIN_BALANCE_WEI): "
            f"send {them} ETH for gas"
        )
    if problems:
        return CheckResult.problem("relayer", "; ".join(problems), fatal=bool(unread))
    return CheckResult.passed("relayer", f"{', '.join(held)} (floor {floor} ETH)")


async def _balance(rpc: RpcClient, address: str) -> int:
    return int(await rpc.call("eth_getBalance", address, "latest"), 16)


async def check_schema(engine: AsyncEngine, *branches: str, upgrade_command: str) -> CheckResult:
    """`database`: the database behind `engine` answers and each migration branch named is at its head."""
    where = printable_url(engine.url.render_as_string(hide_password=False))
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


async def check_database(url: str, *branches: str, upgrade_command: str) -> CheckResult:
    """`database`, from a URL: like `check_schema`, and never creates a missing SQLite file."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not await asyncio.to_thread(Path(parsed.database).is_file):
            return CheckResult.problem(
                "database", f"there is no database at {parsed.database}: run `{upgrade_command}`"
            )
    try:
        engine = create_engine(url)
    except (ValueError, SQLAlchemyError) as exc:
        return CheckResult.problem("database", f"X402_DATABASE_URL is not usable: {_first_line(exc)}")
    try:
        return await check_schema(engine, *branches, upgrade_command=upgrade_command)
    finally:
        await engine.dispose()


async def check_facilitator(settings: FacilitatorSettings) -> list[CheckResult]:
    """Every check of a facilitator configured by `settings`: network, relayer, database."""
    rpc = RpcClient(settings.rpc_url, timeout_s=settings.rpc_timeout_s)
    try:
        return await run_checks(
            {
                "network": check_network(rpc, settings.network),
                "relayer": _check_relayer(rpc, settings),
                "database": check_database(
                    settings.database_url, "facilitator", upgrade_command="x402-facilitator db upgrade"
                ),
            }
        )
    finally:
        await rpc.aclose()


async def _check_relayer(rpc: RpcClient, settings: FacilitatorSettings) -> CheckResult:
    # Any replica may lease any key of the pool (X402_RELAYER_KEY and X402_RELAYER_KEYS): each is checked.
    try:
        # A key given as a file path is read from disk: off the event loop.
        keys = await asyncio.to_thread(settings.relayer_private_keys)
    except ValueError as exc:
        return CheckResult.problem("relayer", str(exc))
    addresses = [Account.from_key(key).address for key in keys]
    return await _check_relayers_funded(rpc, addresses, settings.relayer_min_balance_wei)


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
