"""The merchant's readiness checks (`/readyz`): its database, its node, and its facilitator's means.

Composed from the facilitator's shared probes (the same ones `x402-merchant check` runs) at each request:
`database`: the merchant schema (and, with the in-process facilitator, the claim store's) is at the code's
head. `chain`: the node at `X402_RPC_URL` answers on the chain `X402_NETWORK` names. With the in-process
facilitator, `relayer`: each relayer holds at least `X402_RELAYER_MIN_BALANCE_WEI` (the chain and the
relayers are read in one batch) and, with `X402_RELAYER_REVERT_BUDGET_WEI` set, `revert budget`: no
relayer key spent its hourly budget on reverted settlements (the facilitator's own check); with a remote
one (`X402_FACILITATOR_URL`), `facilitator`: it lists `exact` on the network in `GET /supported`, as
`check` asks. Where some tenant meters a skill, `metering` (`_metering`): the `/supported` answer metered
offers read lists `upto` on the network.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.facilitator import (
    ChainStatus,
    Facilitator,
    FacilitatorClient,
    network_check,
    read_once,
    relayer_check,
    relayer_revert_checks,
    schema_check,
)
from a2a_x402.observability import Check

from ._facilitator_probe import remote_facilitator_check
from ._metering import CHAIN_LACKS_UPTO, metering_check, supported_lists_upto
from .payments import SupportedSource

__all__ = ["merchant_checks"]

_UPGRADE = "x402-merchant db upgrade"
_REMOTE = "the facilitator at X402_FACILITATOR_URL"


def merchant_checks(
    *,
    engine: AsyncEngine,
    facilitator: FacilitatorClient,
    facilitator_url: str | None,
    chain_status: Callable[[], Awaitable[ChainStatus]],
    network: str,
    min_balance_wei: int,
    metered: Sequence[str] = (),
    supported: SupportedSource | None = None,
) -> list[Check]:
    """The checks one `/readyz` request runs for a merchant so composed (`chain_status` read once); with
    `metered` skills (`tenant.skill`), `metering` of the facilitator's `supported` answer."""
    read = read_once(chain_status)
    in_process = isinstance(facilitator, Facilitator)
    checks = [
        schema_check(
            engine,
            "merchant",
            *(("facilitator",) if in_process else ()),
            upgrade_command=_UPGRADE,
            where="the database",
        ),
        network_check(read, network, name="chain"),
    ]
    if isinstance(facilitator, Facilitator):
        checks.append(relayer_check(read, min_balance_wei))
        checks += relayer_revert_checks(facilitator)
    elif facilitator_url is not None:
        checks.append(remote_facilitator_check(facilitator_url, network, where=_REMOTE))
    if supported is not None:
        where, lacking = ("the in-process facilitator", CHAIN_LACKS_UPTO) if in_process else (_REMOTE, "")
        listed = supported_lists_upto(supported, network)
        metering = metering_check(metered, listed, where=where, network=network, lacking=lacking)
        if metering is not None:
            checks.append(metering)
    return checks
