"""The probes both check surfaces share: the database's schema, the node's chain, the relayers' funds; and
those of the preflight only: the code of the listed ERC-6492 wallet factories, and a token's code and
EIP-712 domain (the merchant's `X402_ASSET`, the facilitator's `X402_ASSETS`).

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

from eth_abi.abi import decode
from eth_abi.exceptions import DecodingError
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402 import cli
from a2a_x402.observability import Check, CheckResult
from a2a_x402.storage import MissingDatabaseError, checking_engine, printable_url, schema_state

from ._errors import ChainError, RpcError
from ._probe import ChainStatus, RelayerStatus
from ._rpc import RpcClient
from .wire import chain_id_from_caip2

__all__ = [
    "CHECK_TIMEOUT_S",
    "FOREIGN_SETTLEMENTS_COUNTED",
    "ReadStatus",
    "assets_check",
    "check_asset_code",
    "check_asset_domain",
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
_EIP712_DOMAIN_CALL = "0x84b0196e"  # eip712Domain() (ERC-5267)
_NAME_CALL = "0x06fdde03"  # name()
_VERSION_CALL = "0x54fd4d50"  # version()
_DECIMALS_CALL = "0x313ce567"  # decimals()
_EIP712_DOMAIN_TYPES = ["bytes1", "string", "string", "uint256", "address", "bytes32", "uint256[]"]


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


async def check_asset_code(
    rpc: RpcClient, asset: str, network: str, *, name: str = "asset", setting: str = "X402_ASSET"
) -> CheckResult:
    """`asset`: a contract is deployed at `asset` (fatal: without one every settlement fails)."""
    try:
        code = await rpc.call("eth_getCode", asset, "latest")
    except ChainError as exc:
        return CheckResult.problem(name, f"cannot read the code at {asset}: {exc}")
    if not isinstance(code, str) or code in ("0x", "0x0", ""):
        return CheckResult.problem(
            name, f"there is no contract at {setting} {asset} on {network}: check the token address"
        )
    return CheckResult.passed(name, f"{asset} has code ({(len(code) - 2) // 2} bytes)")


async def check_asset_domain(
    rpc: RpcClient,
    asset: str,
    expected_name: str | None,
    expected_version: str | None,
    *,
    expected_decimals: int | None = None,
    name: str = "asset domain",
    settings: tuple[str, str, str] = ("X402_ASSET_NAME", "X402_ASSET_VERSION", "X402_ASSET_DECIMALS"),
) -> CheckResult:
    """`asset domain`: the token's EIP-712 domain is the one payers are told to sign, and its decimals the
    ones amounts are counted in (each compared only when expected; `settings` name where each comes from).

    The domain is read from `eip712Domain()` (ERC-5267) where the token has it, else from `name()` and
    `version()` (FiatToken's way): the first is what the token verifies signatures against.
    """
    try:
        if await rpc.call("eth_getCode", asset, "latest") in ("0x", "0x0", ""):
            # `asset` reports this one, fatally; here it is only why nothing could be read.
            return CheckResult.problem(name, f"not read: no contract at {asset}", fatal=False)
        source, domain_name, domain_version = await _read_domain(rpc, asset)
        decimals = await _read_decimals(rpc, asset)
    except (RpcError, DecodingError, ValueError, OverflowError):
        # A refusal (revert) or a non-string answer: the contract has no EIP-712 domain to read.
        return CheckResult.problem(
            name, f"{asset} answers name() or version() with no string: is it an EIP-3009 token?"
        )
    except ChainError as exc:
        return CheckResult.problem(name, f"cannot read the EIP-712 domain of {asset}: {exc}")
    name_setting, version_setting, decimals_setting = settings
    wrong = [
        f"{source[0]} is {domain_name!r} but {name_setting} is {expected_name!r}"
        if expected_name is not None and domain_name != expected_name
        else "",
        f"{source[1]} is {domain_version!r} but {version_setting} is {expected_version!r}"
        if expected_version is not None and domain_version != expected_version
        else "",
        f"decimals() is {decimals} but {decimals_setting} is {expected_decimals}"
        if expected_decimals is not None and decimals != expected_decimals
        else "",
    ]
    if any(wrong):
        return CheckResult.problem(name, "; ".join(problem for problem in wrong if problem))
    shown = f"{source[0]} {domain_name!r}, {source[1]} {domain_version!r}"
    return CheckResult.passed(name, shown + (f", decimals() {decimals}" if decimals is not None else ""))


def assets_check(rpc: RpcClient, asset: str, network: str, name: str | None, version: str | None) -> Check:
    """`asset <address>`: one token of the facilitator's `X402_ASSETS` has code, and the EIP-712 domain listed
    with it (if any); its domain and decimals are shown either way."""
    title = f"asset {asset}"

    async def probe() -> CheckResult:
        code = await check_asset_code(rpc, asset, network, name=title, setting="X402_ASSETS")
        if not code.ok:
            return code
        domain = await check_asset_domain(
            rpc,
            asset,
            name,
            version,
            name=title,
            settings=("X402_ASSETS' name", "X402_ASSETS' version", "X402_ASSETS' decimals"),
        )
        if not domain.ok:
            return domain
        return CheckResult.passed(title, f"{code.detail}; {domain.detail}")

    return Check(title, probe)


async def _read_domain(rpc: RpcClient, asset: str) -> tuple[tuple[str, str], str, str]:
    """Where the domain was read, and its name and version: from `eip712Domain()`, else `name()`/`version()`.

    Raises:
        ChainError: the node could not be asked, or refused `name()` or `version()` (`RpcError`; a refusal
            of `eip712Domain()` falls back instead).
        DecodingError | ValueError: `name()` or `version()` answered something that is not a string.
    """
    try:
        answer = await rpc.call("eth_call", {"to": asset, "data": _EIP712_DOMAIN_CALL}, "latest")
        fields = decode(_EIP712_DOMAIN_TYPES, bytes.fromhex(str(answer).removeprefix("0x")))
        flags = fields[0][0]
        if flags & 0x03 == 0x03:  # the domain has both a name and a version
            return ("the EIP-712 name", "the EIP-712 version"), str(fields[1]), str(fields[2])
    except (RpcError, DecodingError, ValueError, OverflowError, IndexError):
        pass  # no ERC-5267 (FiatToken has none): its name() and version() are the domain's
    return (
        ("name()", "version()"),
        await _call_string(rpc, asset, _NAME_CALL),
        await _call_string(rpc, asset, _VERSION_CALL),
    )


async def _read_decimals(rpc: RpcClient, asset: str) -> int | None:
    """The token's `decimals()`, or None if it has none (optional in ERC-20)."""
    try:
        answer = await rpc.call("eth_call", {"to": asset, "data": _DECIMALS_CALL}, "latest")
        (decimals,) = decode(["uint8"], bytes.fromhex(str(answer).removeprefix("0x")))
    except (RpcError, DecodingError, ValueError, OverflowError):
        return None
    return int(decimals)


async def _call_string(rpc: RpcClient, contract: str, data: str) -> str:
    result = await rpc.call("eth_call", {"to": contract, "data": data}, "latest")
    (text,) = decode(["string"], bytes.fromhex(str(result).removeprefix("0x")))
    return str(text)


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
