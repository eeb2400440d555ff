"""The merchant's readiness checks (`/readyz`): its database, its node, and its facilitator's means.

`database`: the merchant schema (and, with the in-process facilitator, the claim store's) is at the code's
head. `chain`: the node at `X402_RPC_URL` answers on the chain `X402_NETWORK` names. With the in-process
facilitator, `relayer`: each relayer holds at least `X402_RELAYER_MIN_BALANCE_WEI`; with a remote one
(`X402_FACILITATOR_URL`), `facilitator`: it answers its liveness probe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from facilitator import ChainStatus, Facilitator, FacilitatorClient, chain_check, relayer_check, schema_check
from observability import Check, NotReadyError

__all__ = ["merchant_checks"]

_FACILITATOR_PROBE_TIMEOUT_S = 3.0


def _remote_check(base_url: str) -> Check:
    async def probe() -> str:
        url = base_url.rstrip("/") + "/healthz"
        try:
            async with httpx.AsyncClient(timeout=_FACILITATOR_PROBE_TIMEOUT_S) as client:
                response = await client.get(url)
        except httpx.HTTPError as exc:
            raise NotReadyError(
                f"the facilitator at X402_FACILITATOR_URL is unreachable ({type(exc).__name__})"
            ) from exc
        if response.status_code != 200:
            raise NotReadyError(
                f"the facilitator at X402_FACILITATOR_URL answered HTTP {response.status_code}"
            )
        return "the facilitator answers"

    return Check("facilitator", probe)


def merchant_checks(
    *,
    engine: AsyncEngine,
    facilitator: FacilitatorClient,
    facilitator_url: str | None,
    chain_status: Callable[[], Awaitable[ChainStatus]],
    chain_id: int,
    network: str,
    min_balance_wei: int,
) -> list[Check]:
    """The checks `/readyz` runs for a merchant so composed."""
    in_process = isinstance(facilitator, Facilitator)
    checks = [
        schema_check(engine, "merchant", *(("facilitator",) if in_process else ())),
        chain_check(chain_status, chain_id=chain_id, network=network),
    ]
    if isinstance(facilitator, Facilitator):
        checks.append(relayer_check(facilitator.chain_status, min_balance_wei=min_balance_wei))
    elif facilitator_url is not None:
        checks.append(_remote_check(facilitator_url))
    return checks
