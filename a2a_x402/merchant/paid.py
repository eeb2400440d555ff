"""Any a2a-sdk `AgentExecutor`, paid per request: `paid_app` composes the whole merchant around it.

Composition, outside in: the edge (A2A 1.0 and 0.3 routes on every binding, tenants, cards, the tenant task
store) → the payment layer's request handler (checks before anything changes) → the SDK's handler →
`PaymentExecutor` → the executor given. The settlement goes through the in-process facilitator (sharing
this database and chain) or a remote one (`X402_FACILITATOR_URL`) and is booked in the ledger; beside the
A2A routes are `/metrics`, `/readyz`, the card's JWKS when it is signed, the tenants' billing API and,
optionally, their dashboard; in the lifespan run the webhook delivery, the reconciler and the purges of
unpaid work and of AP2 evidence past its retention. This is the one composition path: the reference
merchant (`app.build_app`) is a call of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from functools import partial
from urllib.parse import urlsplit

import httpx
from a2a.server.agent_execution import AgentExecutor
from a2a.types import AgentSkill, Message
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.routing import BaseRoute

from a2a_x402.cli import load_settings
from a2a_x402.facilitator import (
    ChainStatus,
    Facilitator,
    HttpFacilitatorClient,
    RpcClient,
    read_chain_status,
)
from a2a_x402.observability import FailureThrottle, metrics_route, readiness_route, redact_values
from a2a_x402.storage import create_engine

from ._ap2_card import ap2_jwks_route
from ._health import merchant_checks
from ._metering import metered_names
from ._metrics import MerchantMetrics, TimedFacilitator
from ._no_store import NoStoreMiddleware
from ._paid_ap2 import ap2_parts
from ._paid_parts import card_settings, card_signing, grpc_addresses, log_startup, secrets_of, supported_kinds
from ._paid_rules import PaidAppError, checked_prices, checked_skills, priced_tenants, skill_resolver
from .ap2 import MandateUsageStore
from .callers import CallerKeys
from .dashboard import (
    AssetInfo,
    DashboardAuth,
    DashboardData,
    DifferenceDesk,
    SessionStore,
    create_dashboard_router,
    explorers_for,
    origin_of,
)
from .differences import DifferenceStore
from .edge import TenantTaskStore, create_app
from .ledger import Ledger
from .payments import (
    Asset,
    Checkouts,
    GasSponsoring,
    OfferReader,
    OfferStore,
    PaymentExecutor,
    PaymentRequestHandler,
    Presentations,
    Pricing,
    TransferMethod,
    UnpaidRules,
    UnpaidWork,
    probe_transfer_method,
)
from .settings import MerchantSettings
from .tenants import DEFAULT_TENANT_SEGMENT, TenantRegistry
from .webhooks import DeliveryWorker, Outbox, WebhookEndpoints, create_billing_router, endpoint_configs
from .wiring import build_authenticator, build_reconciler, load_tenants, request_limits

__all__ = ["PaidAppError", "paid_app"]

_PROBE_RPC_TIMEOUT_S = 3.0
"""Timeout of the chain reads of `/readyz` and `/metrics` with a remote facilitator."""


def paid_app(
    executor: AgentExecutor,
    *,
    name: str,
    description: str,
    skills: Sequence[AgentSkill],
    prices: Mapping[str, int] | None = None,
    settings: MerchantSettings | None = None,
    skill_of: Callable[[Message], str] | None = None,
    version: str = "1.0.0",
    tenants: TenantRegistry | None = None,
    dashboard: bool = True,
    webhooks: bool = True,
    reconciler: bool = True,
) -> FastAPI:
    """Make `executor` a paid, conforming A2A merchant: one ASGI app serving A2A 1.0 and 0.3.

    Nothing connects or starts until the app's lifespan runs (uvicorn, or any ASGI server); the database
    must be migrated first (`x402-merchant db upgrade`). The executor knows nothing of payments: a priced
    request is answered with the x402 terms, and the executor runs only once a payment for them is
    verified; its artifacts reach the client only after the settlement is on chain and booked.

    Example, a complete merchant (`shout.py`)::

        from a2a.helpers import get_message_text, new_task_from_user_message
        from a2a.server.agent_execution import AgentExecutor, RequestContext
        from a2a.server.events import EventQueue
        from a2a.server.tasks import TaskUpdater
        from a2a.types import AgentSkill, Part

        from a2a_x402.merchant import paid_app


        class Shout(AgentExecutor):
            async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
                if context.current_task is None:
                    await event_queue.enqueue_event(new_task_from_user_message(context.message))
                updater = TaskUpdater(event_queue, context.task_id, context.context_id)
                await updater.add_artifact([Part(text=get_message_text(context.message).upper())])
                await updater.complete()

            async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
                await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


        app = paid_app(
            Shout(),
            name="Shouter",
            description="Your text in capitals, 0.05 USDC a time.",
            skills=[AgentSkill(id="shout", name="Shout", description="Upper-cases a text.", tags=["text"])],
            prices={"shout": 50_000},  # atomic units: 0.05 of a 6-decimal token
        )

    served with the settings in the environment (the token, the payee, the relayer that settles)::

        export X402_ASSET=0x... X402_PAY_TO=0x... X402_RELAYER_KEY=0x... X402_RPC_URL=http://127.0.0.1:8545
        x402-merchant db upgrade && uvicorn shout:app --port 8000

    Args:
        executor: the agent, any a2a-sdk `AgentExecutor` (not a `PaymentExecutor`: the layer is added here).
        name: the Agent Card's name.
        description: the Agent Card's description.
        skills: the skills the card lists; every price and every answer of `skill_of` names one by its id.
        prices: atomic units per skill id for the default tenant (its `skill_prices`; 0 is free); a skill
            without one costs the default tenant's `X402_PRICE`. A tenants file (`X402_TENANTS_FILE`) gives
            the other tenants theirs.
        settings: the merchant's settings; default: read from the `X402_*` environment (and `.env`).
        skill_of: which skill (by id) a message asks for; needed only with several skills. An answer naming
            no skill in `skills` refuses the request (`InvalidParams`) before any task exists.
        version: the Agent Card's version of the agent.
        tenants: the tenants served, instead of those `settings` name (its tenants file or `X402_PAY_TO`).
        dashboard: serve the tenants' dashboard under `/tenants/{tenant}/dashboard`.
        webhooks: deliver the tenants' webhook events; without, events stay readable in the billing API.
        reconciler: reconcile the books with the chain and finish paid turns a restart interrupted.

    Returns:
        The FastAPI app.

    Raises:
        PaidAppError: the call is wrong: no skills or a duplicate id, a price for a skill not in `skills`, a
            negative or non-integer price, several skills without `skill_of`, a `PaymentExecutor` given,
            tenants pricing skills not offered, or `webhooks=False` with webhook endpoints configured.
        cli.ConfigError: `settings` is None and the environment's `X402_*` settings are missing or wrong.
        TenantConfigError: the tenants file is unreadable or invalid.
        agentcard.KeyStoreError, agentcard.KeyLoadError: the card signing keys configured cannot be read.
    """
    if isinstance(executor, PaymentExecutor):
        raise PaidAppError("executor is a PaymentExecutor already: pass the executor it wraps")
    if not isinstance(executor, AgentExecutor):
        raise PaidAppError(f"executor must be an a2a-sdk AgentExecutor, got {type(executor).__name__}")
    offered = checked_skills(skills)
    own_prices = checked_prices(prices, offered)
    resolve_skill = skill_resolver(offered, skill_of)
    if settings is None:
        settings = load_settings(MerchantSettings)
    source = settings.tenants_file if tenants is None else None
    tenants = priced_tenants(
        load_tenants(settings) if tenants is None else tenants, own_prices, offered, source
    )
    if not webhooks and any(tenant.webhook_endpoints for tenant in tenants):
        raise PaidAppError(
            "webhooks=False, but the tenants configure webhook endpoints: remove them, or pass webhooks=True"
        )
    # Whatever logs them (a dependency at DEBUG, an exception's text), these never reach a log line.
    redact_values(secrets_of(settings, tenants))
    engine = create_engine(settings.database_url)
    asset = Asset(
        network=settings.network,
        address=settings.asset,
        name=settings.asset_name,
        version=settings.asset_version,
        decimals=settings.asset_decimals,
        transfer_method=TransferMethod.PERMIT2
        if settings.asset_transfer_method == "permit2"
        else TransferMethod.EIP3009,
    )
    facilitator: Facilitator | HttpFacilitatorClient = (
        HttpFacilitatorClient(settings.facilitator_url, api_key=settings.remote_facilitator_key())
        if settings.facilitator_url
        else Facilitator.from_settings(settings.facilitator_settings(), engine=engine)
    )
    # The merchant's own node: paid turns book what it shows, and the reconciler reads it.
    chain_rpc = RpcClient(settings.rpc_url)
    supported = partial(supported_kinds, facilitator)
    # x402 v1 terms name the media type of what is paid for: each skill's first output mode.
    pricing = Pricing(
        tenants,
        asset,
        resource_url=settings.base_url,
        mime_types={skill.id: skill.output_modes[0] for skill in offered if skill.output_modes},
        supported=supported,
        sponsoring=GasSponsoring(supported, chain_rpc),
    )
    outbox = Outbox(engine)
    ledger = Ledger(engine, outbox)
    # A round's end decides the use its AP2 mandates reserved, in the same transaction (§20.5).
    mandate_usage = MandateUsageStore(engine)
    offers = OfferStore(engine, events=outbox, usage=mandate_usage)
    unpaid = UnpaidWork(
        engine,
        tenants=tenants,
        defaults=UnpaidRules(
            max_awaiting=settings.max_unpaid_tasks,
            max_per_minute=settings.max_unpaid_per_minute,
            retention_s=settings.unpaid_retention_s,
        ),
        offer_timeout_s=pricing.max_timeout_seconds,
        usage=mandate_usage,
    )
    metrics = MerchantMetrics(CollectorRegistry())
    # One client for the key sets the merchant fetches: its callers' JWT issuers, its tenants' AP2 issuers.
    jwks_http = httpx.AsyncClient()
    # What a checkout's or a cart's items call each skill.
    titles = {skill.id: skill.name for skill in offered}
    ap2 = ap2_parts(
        tenants,
        settings,
        engine=engine,
        pricing=pricing,
        titles=titles,
        usage=mandate_usage,
        jwks_http=jwks_http,
        metrics=metrics,
    )
    paying = PaymentExecutor(
        executor,
        pricing=pricing,
        facilitator=TimedFacilitator(facilitator, metrics),
        offers=offers,
        ledger=ledger,
        chain=chain_rpc,
        skill_of=resolve_skill,
        settle_timeout_s=settings.settle_timeout_s,
        on_outcome=metrics.payment,
        unpaid=unpaid,
        checkouts=Checkouts(pricing, titles),
        carts=ap2.carts,
        evidence=ap2.evidence,
    )
    # One store for the requests and the reconciler: a request's remembered read is stale once either saves.
    # Its final-state hook marks the offers whose outcome the client has been told.
    task_store = TenantTaskStore(engine, on_final=offers.told_in)
    reconciling = (
        build_reconciler(
            settings,
            engine=engine,
            facilitator=facilitator,
            offers=offers,
            ledger=ledger,
            tenants=tenants,
            on_report=metrics.reconciled,
            tasks=task_store,
            rpc=chain_rpc,
        )
        if reconciler
        else None
    )
    # The in-process facilitator reads the chain for its relayers anyway; a remote one's merchant asks alone.
    probe_rpc: RpcClient | None = None
    chain_status: Callable[[], Awaitable[ChainStatus]]
    if isinstance(facilitator, Facilitator):
        chain_status = facilitator.chain_status
    else:
        probe_rpc = RpcClient(settings.rpc_url, timeout_s=_PROBE_RPC_TIMEOUT_S)
        chain_status = partial(read_chain_status, probe_rpc)
    scraped = metrics.scrape(
        engine=engine, offers=offers, ledger=ledger, facilitator=facilitator, chain_status=chain_status
    )
    checks = partial(
        merchant_checks,
        engine=engine,
        facilitator=facilitator,
        facilitator_url=settings.facilitator_url,
        chain_status=chain_status,
        network=settings.network,
        min_balance_wei=settings.relayer_min_balance_wei,
        metered=metered_names(tenants),
        supported=partial(supported_kinds, facilitator),
    )
    signer, jwks_routes = card_signing(settings)
    grpc_listen, grpc_url = grpc_addresses(settings)

    def api_token_of(tenant: str) -> str | None:
        return getattr(tenants.get(tenant), "api_token", None)

    # One count of wrong tokens per tenant and address for the billing API and the dashboard together.
    throttle = FailureThrottle()
    billing = create_billing_router(
        ledger=ledger,
        outbox=outbox,
        api_token_of=api_token_of,
        default_tenant_segment=DEFAULT_TENANT_SEGMENT,
        throttle=throttle,
        limits=unpaid,
    )
    routes: list[BaseRoute] = [
        metrics_route(metrics.registry, scraped),
        readiness_route(checks),
        *jwks_routes,
        *([ap2_jwks_route(tenants)] if ap2.declarations else []),
        *billing.routes,
    ]
    if dashboard:
        routes += create_dashboard_router(
            data=DashboardData(
                ledger=ledger,
                outbox=outbox,
                endpoints=WebhookEndpoints(engine),
                reconciler=reconciling,
                assets={asset.address: AssetInfo(name=asset.name, decimals=asset.decimals)},
                confirmations=settings.confirmations,
                callers=CallerKeys(engine),
                offers=OfferReader(engine),
                differences=DifferenceStore(engine),
            ),
            tenants=tenants,
            auth=DashboardAuth(api_token_of, SessionStore(engine)),
            default_tenant_segment=DEFAULT_TENANT_SEGMENT,
            secure_cookies=urlsplit(settings.base_url).scheme == "https",
            throttle=throttle,
            public_origin=origin_of(settings.base_url),
            explorers=explorers_for(settings.rpc_url, settings.facilitator_url, settings.explorer_urls()),
            differences=DifferenceDesk(DifferenceStore(engine), ledger, settings.network),
        ).routes
    app = create_app(
        authenticator=build_authenticator(settings, engine, jwks_http, tenants),
        executor=paying,
        engine=engine,
        task_store=task_store,
        tenants=tenants,
        card=card_settings(
            settings,
            name=name,
            description=description,
            version=version,
            skills=offered,
            grpc_url=grpc_url,
            pricing=pricing,
            ap2=ap2.declarations,
        ),
        routes=routes,
        card_signer=signer,
        grpc_listen=grpc_listen,
        api_docs=settings.api_docs,
        limits=request_limits(settings),
        handler_layers=[
            lambda inner: PaymentRequestHandler(
                inner,
                pricing=pricing,
                offers=offers,
                presentations=Presentations(engine),
                skill_of=resolve_skill,
                progress_timeout_s=settings.settle_timeout_s,
                unpaid=unpaid,
                mandates=ap2.mandates,
                carts=ap2.carts,
            )
        ],
    )
    app.add_middleware(NoStoreMiddleware, prefixes=("/tenants/",))
    edge_lifespan = app.router.lifespan_context

    async def close_clients() -> None:
        """Close the clients and pools made above: at shutdown, and when the start-up fails."""
        await jwks_http.aclose()
        if reconciling is not None:
            await reconciling.aclose()  # closes the chain client it was given
        else:
            await chain_rpc.aclose()
        if probe_rpc is not None:
            await probe_rpc.aclose()
        await facilitator.aclose()
        await engine.dispose()

    @asynccontextmanager
    async def lifespan(app_: FastAPI) -> AsyncIterator[None]:
        try:
            if isinstance(facilitator, Facilitator):
                await facilitator.startup_checks()
            if settings.asset_transfer_method == "auto":
                method = await probe_transfer_method(chain_rpc, asset.address)
                pricing.asset = replace(asset, transfer_method=method)
            if webhooks:
                await WebhookEndpoints(engine).sync(endpoint_configs(tenants))
        except BaseException:
            # A refused start opened connection pools already (the chain checks' at least): left open,
            # the garbage collector reports each as an asyncio ERROR, at a moment of its own.
            await close_clients()
            raise
        http = httpx.AsyncClient()
        stop = asyncio.Event()
        running = [
            asyncio.create_task(
                unpaid.run(stop, interval_s=settings.unpaid_purge_interval_s, on_purge=metrics.purged),
                name="unpaid-purge",
            ),
            asyncio.create_task(
                ap2.evidence.run(stop, interval_s=settings.unpaid_purge_interval_s), name="ap2-evidence-purge"
            ),
        ]
        if webhooks:
            worker = DeliveryWorker(
                engine,
                http,
                allow_private_targets=settings.webhooks_allow_private,
                on_outcome=metrics.delivery,
            )
            running.append(asyncio.create_task(worker.run(stop), name="webhook-delivery"))
        if reconciling is not None:
            running.append(
                asyncio.create_task(
                    reconciling.run(stop, interval_s=settings.reconcile_interval_s), name="reconciler"
                )
            )
        try:
            async with edge_lifespan(app_):
                log_startup(settings, tenants, signed=signer is not None)
                yield
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*running)
            await http.aclose()
            await close_clients()

    app.router.lifespan_context = lifespan
    return app
