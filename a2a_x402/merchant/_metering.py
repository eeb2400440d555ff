"""`metering`: whether the facilitator settles the `upto` payments the tenants' metered skills are paid with.

A metered skill's terms name the relayer address of the facilitator's `upto` kind on the merchant's network
(its `/supported`, asked at the first metered offer): a facilitator that lists none refuses every metered
request. `x402-merchant check` (and so `serve`) and `/readyz` say so before that first request, naming the
tenants' metered skills (`tenant.skill`), and only where some tenant meters a skill.

Treated as the remote facilitator's own `facilitator` check treats it: a facilitator (or, in process, a node)
that cannot be asked now is a problem but not fatal, as it may come up after the merchant; one that answers
without `upto` is fatal, as every metered request would be refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from a2a_x402.facilitator import ChainError, HttpFacilitatorClient, RpcClient, permit2_schemes
from a2a_x402.observability import Check, CheckResult, failure_reason

from .payments import SupportedSource, upto_address
from .tenants import TenantRegistry, tenant_name

__all__ = [
    "CHAIN_LACKS_UPTO",
    "UptoListed",
    "chain_lists_upto",
    "metered_names",
    "metering_check",
    "remote_lists_upto",
    "supported_lists_upto",
]

UptoListed = Callable[[], Awaitable[bool]]
"""Whether the facilitator settles `upto` payments on the merchant's network; raises `ChainError` (no
answer) or `ValueError` (an answer that is no `/supported` one) when it cannot say."""

CHAIN_LACKS_UPTO = "the chain lacks Permit2 or the x402 upto proxy"
"""Why the in-process facilitator lists no `upto` kind: it settles it wherever the chain has both."""

_PROBE_TIMEOUT_S = 3.0
_REASON_CHARS = 120


def metered_names(tenants: TenantRegistry) -> list[str]:
    """Every metered skill of `tenants`, as `tenant.skill` (the default tenant as `default`)."""
    return [f"{tenant_name(tenant.id)}.{skill}" for tenant in tenants for skill in tenant.metered_skills]


def metering_check(
    metered: Sequence[str], listed: UptoListed, *, where: str, network: str, lacking: str = ""
) -> Check | None:
    """The `metering` check of the `metered` skills against the facilitator `where` names; None without
    metered skills. `lacking` says why the facilitator would list no `upto` kind, where that is known."""
    if not metered:
        return None
    return Check("metering", partial(_check_metering, tuple(metered), listed, where, network, lacking))


async def _check_metering(
    metered: Sequence[str], listed: UptoListed, where: str, network: str, lacking: str
) -> CheckResult:
    skills = f"{len(metered)} metered skill(s) ({', '.join(metered)})"
    try:
        settles = await listed()
    except ChainError as exc:
        reason = failure_reason(exc)[:_REASON_CHARS]
        detail = (
            f"{where} could not be asked whether it settles upto ({reason}): {skills} cannot be offered now"
        )
        return CheckResult.problem("metering", detail, fatal=False)
    except ValueError:
        detail = f"{where} gave no readable /supported answer: {skills} cannot be offered now"
        return CheckResult.problem("metering", detail, fatal=False)
    if not settles:
        because = f" ({lacking})" if lacking else ""
        detail = f"{where} settles no upto payments on {network}{because}: {skills} cannot be offered"
        return CheckResult.problem("metering", detail)
    return CheckResult.passed("metering", f"{where} settles upto on {network} for {skills}")


def supported_lists_upto(supported: SupportedSource, network: str) -> UptoListed:
    """Whether the `/supported` answer `supported` gives (the one metered offers read) lists `upto` with an
    address on `network`."""

    async def listed() -> bool:
        return upto_address(await supported(), network) is not None

    return listed


def remote_lists_upto(url: str, network: str, api_key: str | None) -> UptoListed:
    """`supported_lists_upto` of the facilitator at `url`, asked over a client of its own (`check`'s)."""

    async def listed() -> bool:
        client = HttpFacilitatorClient(url, api_key=api_key, timeout_s=_PROBE_TIMEOUT_S)
        try:
            return upto_address(await client.supported(), network) is not None
        finally:
            await client.aclose()

    return listed


def chain_lists_upto(rpc: RpcClient) -> UptoListed:
    """Whether the in-process facilitator would list `upto`: the chain `rpc` reads has Permit2 and the x402
    upto proxy (what its own start-up reads)."""

    async def listed() -> bool:
        return "upto" in await permit2_schemes(rpc)

    return listed
