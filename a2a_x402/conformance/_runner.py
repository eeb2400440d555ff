"""One run of the kit against one merchant: discover, check every card reading and interface, sweep.

Checks of different interfaces, and the independent scenarios of one interface (each on its own task),
run concurrently up to ``KitSettings.concurrency``; the payer's key signs authorizations with random nonces,
so concurrent payments never collide. At the end every authorization a check expected to stay unused is
read again: a merchant that settles a refused payment later fails that check then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._ap2_flow import AP2_OFFER_CHECKS, ap2_offer, ap2_paid
from ._ap2_offer import check_declaration
from ._ap2_refusals import AP2_REFUSAL_CHECKS, ap2_refusal
from ._ap2_v02 import AP2_V02_CHECKS, AP2_V02_PAYMENT_CHECKS, ap2_v02_offer, ap2_v02_payment
from ._card import Discovery, Interface, discover
from ._card_checks import CARD_CHECKS, card_checks, reading_target
from ._catalogue import CHECKS
from ._chain import ChainError, ChainReader
from ._concurrent import CONCURRENT_CHECKS, represented_concurrently
from ._context import NotApplicable, Probe, Run
from ._flows import PAID_CHECKS, STREAM_CHECKS, paid_task, streamed_task
from ._flows_0_3 import V02_CHECKS, standalone_0_3_problem, v02_task
from ._http import UntrustedHttp
from ._metered import FAILED_WORK_CHECKS, METERED_CHECKS, failed_work, payment_kinds
from ._permit2_flow import PERMIT2_CHECKS
from ._refusals import (
    BAD_PAYMENT_CHECKS,
    REFUSAL_CHECKS,
    anonymous_list,
    bad_payment,
    refusals,
    stranger_cancel,
    stranger_cancel_0_3,
    tenant_isolation,
)
from ._report import Outcome, Report
from ._signer import Signer
from ._streaming_0_3 import V02_STREAM_CHECKS, v02_streamed_task
from ._tenant_card_checks import TENANT_CARD_CHECKS, tenant_card_checks, tenant_card_target
from ._wire import Wire

__all__ = ["KitSettings", "run_conformance"]

Scenario = Callable[[Probe, Wire], Awaitable[None]]


@dataclass(frozen=True)
class KitSettings:
    """What a run needs: where the merchant and the chain are, the payer, and the kit's limits."""

    merchant_url: str
    """The card URL, or the merchant's base URL (the well-known card path is added)."""
    rpc_url: str
    payer_key: str = field(repr=False)
    max_amount: int = 1_000_000
    """The most the kit signs for in one payment, in the asset's atomic units."""
    timeout_s: float = 20.0
    max_bytes: int = 2 * 1024 * 1024
    concurrency: int = 4
    caller_tokens: tuple[str, ...] = field(default=(), repr=False)
    """Bearer tokens of two callers of the default tenant, for the stranger checks (none: not applicable)."""
    only: frozenset[str] = frozenset()
    """Run only the checks whose id is here or starts with one of these followed by a dot (empty: all)."""
    approve_permit2: bool = False
    """Let the kit approve Permit2 for the payer where a Permit2 payment needs it (a transaction: gas)."""
    failing_request: str = ""
    """A request for the metered skill that the operator knows makes its work fail (empty: that check is
    skipped)."""
    ap2_issuer_key: Mapping[str, str] | None = field(default=None, repr=False)
    """The private JWK (EC P-256, with ``kid``) of an issuer the merchant trusts for the AP2 tenants under
    test (None: the checks presenting mandates are skipped)."""
    allow_insecure_jwks: bool = False
    """Development: take a ``jwksUrl`` of plain http on the loopback host as if it were https."""


def _selected(settings: KitSettings, ids: Iterable[str]) -> bool:
    if not settings.only:
        return True
    return any(i in settings.only or any(i.startswith(f"{p}.") for p in settings.only) for i in ids)


def _scenarios(
    discovery: Discovery, interface: Interface, other: Wire | None, callers: tuple[Wire, Wire] | None = None
) -> list[tuple[tuple[str, ...], Scenario]]:
    if interface.version == "0.3":
        own = discovery.tenant_cards.get(interface.tenant)
        card = own.card if own is not None else discovery.readings["0.3"].card
        streaming = v02_streamed_task if _streams(card) else _no_streaming(V02_STREAM_CHECKS)

        async def stranger_0_3(probe: Probe, wire: Wire) -> None:
            await stranger_cancel_0_3(probe, *(callers or (None, None)))

        async def streamed_0_3(probe: Probe, wire: Wire) -> None:
            # The streamed paid turn is the standalone flow's: not a tenant offered the v0.2 embedded form.
            embedded = standalone_0_3_problem(probe, wire.interface.tenant)
            await (_skipped(V02_STREAM_CHECKS, embedded) if embedded else streaming)(probe, wire)

        found_0_3: list[tuple[tuple[str, ...], Scenario]] = [
            (V02_CHECKS, v02_task),
            (V02_STREAM_CHECKS, streamed_0_3),
            (("v02.stranger-cancel",), stranger_0_3),
            (AP2_V02_CHECKS, ap2_v02_offer),
        ]
        for check_id in AP2_V02_PAYMENT_CHECKS:

            async def paid_0_3(probe: Probe, wire: Wire, check_id: str = check_id) -> None:
                await ap2_v02_payment(probe, wire, check_id)

            found_0_3.append(((check_id,), paid_0_3))
        return found_0_3

    async def isolation(probe: Probe, wire: Wire) -> None:
        await tenant_isolation(probe, wire, other)

    async def stranger(probe: Probe, wire: Wire) -> None:
        await stranger_cancel(probe, *(callers or (None, None)))

    found: list[tuple[tuple[str, ...], Scenario]] = [
        (PAID_CHECKS, paid_task),
        (("callers.stranger-cancel",), stranger),
        (("tenant.isolation",), isolation),
        (("callers.anonymous-list-empty",), anonymous_list),
        (
            STREAM_CHECKS,
            streamed_task if _streams(discovery.readings["1.0"].card) else _no_streaming(STREAM_CHECKS),
        ),
        (CONCURRENT_CHECKS, represented_concurrently),
        (REFUSAL_CHECKS, refusals),
        ((*PERMIT2_CHECKS, *METERED_CHECKS), payment_kinds),
        (FAILED_WORK_CHECKS, failed_work),
        (AP2_OFFER_CHECKS, ap2_offer),
        (("ap2.paid-with-mandates",), ap2_paid),
    ]
    for check_id in BAD_PAYMENT_CHECKS:

        async def one(probe: Probe, wire: Wire, check_id: str = check_id) -> None:
            await bad_payment(probe, wire, check_id)

        found.append(((check_id,), one))
    for check_id in AP2_REFUSAL_CHECKS:

        async def refused(probe: Probe, wire: Wire, check_id: str = check_id) -> None:
            await ap2_refusal(probe, wire, check_id)

        found.append(((check_id,), refused))
    return found


def _streams(card: dict[str, Any] | None) -> bool:
    capabilities = (card or {}).get("capabilities")
    return isinstance(capabilities, dict) and capabilities.get("streaming") is True


def _no_streaming(check_ids: tuple[str, ...]) -> Scenario:
    return _skipped(check_ids, "the card does not declare capabilities.streaming")


def _skipped(check_ids: tuple[str, ...], reason: str) -> Scenario:
    async def skip(probe: Probe, wire: Wire) -> None:
        for check_id in check_ids:
            async with probe.check(check_id):
                raise NotApplicable(reason)

    return skip


async def run_conformance(settings: KitSettings) -> Report:
    """Run every selected check against the merchant; never raises for anything the merchant does."""
    http = UntrustedHttp(timeout_s=settings.timeout_s, max_bytes=settings.max_bytes)
    chain = ChainReader(settings.rpc_url, timeout_s=settings.timeout_s, max_bytes=settings.max_bytes)
    try:
        return await _run(settings, http, chain)
    finally:
        await http.aclose()
        await chain.aclose()


async def _run(settings: KitSettings, http: UntrustedHttp, chain: ChainReader) -> Report:
    discovery = await discover(http, settings.merchant_url)
    report = Report(discovery.card_url)
    try:
        start_block = max(await chain.block_number() - 1, 0)
    except ChainError:
        start_block = 0  # every chain check then fails with the node's error as its evidence
    signer = Signer(settings.payer_key, discovery, max_amount=settings.max_amount)
    run = Run(
        report,
        discovery,
        http,
        chain,
        signer,
        start_block,
        settings.timeout_s,
        settings.max_bytes,
        approve_permit2=settings.approve_permit2,
        failing_request=settings.failing_request,
        ap2_issuer_key=settings.ap2_issuer_key,
        allow_insecure_jwks=settings.allow_insecure_jwks,
    )
    versions = {i.version for i in discovery.interfaces}
    both = versions == {"1.0", "0.3"}
    readings = ["1.0", "0.3", ""] if both else ["1.0", *(["0.3"] if "0.3" in versions else [])]
    limit = asyncio.Semaphore(settings.concurrency)
    jobs: list[Awaitable[None]] = []
    for version in readings:
        target = reading_target(version)
        report.targets.append(target)
        if _selected(settings, (*CARD_CHECKS, "card.vary", "card.unversioned-lists-both")):
            jobs.append(_card_job(Probe(run, target), run, version, both))
        if version == "1.0" and _selected(settings, ("ap2.declaration",)):
            jobs.append(_declaration_job(Probe(run, target)))
    for tenant in discovery.tenant_cards:
        target = tenant_card_target(tenant)
        report.targets.append(target)
        if _selected(settings, TENANT_CARD_CHECKS):
            jobs.append(_tenant_card_job(Probe(run, target), run, tenant))
    for interface in discovery.interfaces:
        report.targets.append(interface.label)
        wire = Wire(http, interface, timeout_s=settings.timeout_s, max_bytes=settings.max_bytes)
        callers = _callers(run, interface, settings.caller_tokens)
        for ids, scenario in _scenarios(discovery, interface, _neighbour(run, interface), callers):
            if _selected(settings, ids):
                jobs.append(_job(limit, Probe(run, interface.label), ids, scenario, wire))
    await asyncio.gather(*jobs)
    await _sweep(run)
    _filter_and_order(report, settings)
    return report


def _callers(run: Run, interface: Interface, tokens: tuple[str, ...]) -> tuple[Wire, Wire] | None:
    """Wires of two authenticated callers on ``interface`` (default tenant only: keys are per tenant)."""
    if len(tokens) < 2 or interface.tenant:
        return None
    return (
        Wire(run.http, interface, timeout_s=run.timeout_s, max_bytes=run.max_bytes, credential=tokens[0]),
        Wire(run.http, interface, timeout_s=run.timeout_s, max_bytes=run.max_bytes, credential=tokens[1]),
    )


def _neighbour(run: Run, interface: Interface) -> Wire | None:
    """A wire to the first interface of the same binding and version serving another tenant."""
    for candidate in run.discovery.interfaces:
        same = (candidate.binding, candidate.version) == (interface.binding, interface.version)
        if same and candidate.tenant != interface.tenant:
            return Wire(run.http, candidate, timeout_s=run.timeout_s, max_bytes=run.max_bytes)
    return None


async def _card_job(probe: Probe, run: Run, version: str, both: bool) -> None:
    reading = run.discovery.readings[version]
    async with probe.scenario(CARD_CHECKS) as scenario:
        await card_checks(scenario, reading, run.discovery, both, allow_insecure_jwks=run.allow_insecure_jwks)


async def _declaration_job(probe: Probe) -> None:
    async with probe.scenario(("ap2.declaration",)) as scenario, scenario.check("ap2.declaration"):
        await check_declaration(scenario)


async def _tenant_card_job(probe: Probe, run: Run, tenant: str) -> None:
    async with probe.scenario(TENANT_CARD_CHECKS) as scenario:
        await tenant_card_checks(scenario, tenant, run.discovery)


async def _job(
    limit: asyncio.Semaphore, probe: Probe, ids: tuple[str, ...], scenario: Scenario, wire: Wire
) -> None:
    async with limit, probe.scenario(ids) as inner:
        await scenario(inner, wire)


async def _sweep(run: Run) -> None:
    for unspent in run.unspent:
        try:
            used = await run.chain.nonce_used(unspent.asset, unspent.payer, unspent.nonce)
        except ChainError:
            continue  # the check already read it unused; a node failure now proves nothing either way
        result = run.report.result(unspent.check_id, unspent.target)
        if used and result is not None:
            result.outcome = Outcome.FAILED
            result.detail = "the refused authorization was used on chain after the answer: money moved"


def _filter_and_order(report: Report, settings: KitSettings) -> None:
    order = {spec.id: index for index, spec in enumerate(CHECKS)}
    targets = {target: index for index, target in enumerate(report.targets)}
    kept = [r for r in report.results if _selected(settings, (r.spec.id,))]
    report.results = sorted(kept, key=lambda r: (targets.get(r.target, len(targets)), order[r.spec.id]))
