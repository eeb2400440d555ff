"""Readiness checks of a settling service: its database's schema, its node's chain, its relayers' funds.

Each check is a named probe for `observability.readiness_route`; the facilitator's app serves
`facilitator_checks`, and the merchant composes the same checks for its own database and in-process
facilitator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncEngine

from observability import Check, NotReadyError
from storage import outdated_branches

from ._probe import ChainStatus
from ._service import Facilitator

__all__ = ["chain_check", "facilitator_checks", "relayer_check", "schema_check"]

ReadStatus = Callable[[], Awaitable[ChainStatus]]


def schema_check(engine: AsyncEngine, *branches: str) -> Check:
    """`database`: the database answers and every one of `branches` is at the code's head revision."""

    async def probe() -> str:
        outdated = await outdated_branches(engine, *branches)
        if outdated:
            raise NotReadyError(f"schema not current for {', '.join(outdated)}: run `db upgrade`")
        return f"schema current ({', '.join(branches)})"

    return Check("database", probe)


def chain_check(read: ReadStatus, *, chain_id: int, network: str) -> Check:
    """`chain`: the node answers and serves the chain `network` names."""

    async def probe() -> str:
        status = await read()
        if status.chain_id != chain_id:
            raise NotReadyError(f"the node serves chain {status.chain_id}, but X402_NETWORK is {network}")
        return f"chain {status.chain_id}, head {status.head_block}"

    return Check("chain", probe)


def relayer_check(read: ReadStatus, *, min_balance_wei: int) -> Check:
    """`relayer`: every relayer holds at least `min_balance_wei` (X402_RELAYER_MIN_BALANCE_WEI) for gas."""

    async def probe() -> str:
        status = await read()
        poor = [r for r in status.relayers if r.balance_wei < min_balance_wei]
        if poor:
            listed = ", ".join(f"{r.address} has {r.balance_wei} wei" for r in poor)
            raise NotReadyError(f"relayer below X402_RELAYER_MIN_BALANCE_WEI ({min_balance_wei}): {listed}")
        return ", ".join(f"{r.address} has {r.balance_wei} wei" for r in status.relayers)

    return Check("relayer", probe)


def facilitator_checks(facilitator: Facilitator, *, min_balance_wei: int) -> list[Check]:
    """The facilitator service's readiness: claim store, chain, relayer."""
    return [
        schema_check(facilitator.engine, "facilitator"),
        chain_check(facilitator.chain_status, chain_id=facilitator.chain_id, network=facilitator.network),
        relayer_check(facilitator.chain_status, min_balance_wei=min_balance_wei),
    ]
