"""The reference merchant: the text-stats skill, charged for through the payment layer, as one app.

Composition, outside in: the edge (A2A routes, tenants, card) → the payment layer's request handler (checks
before anything changes) → the SDK's handler → `PaymentExecutor` → `TextStatsExecutor`. The settlement
goes through the in-process facilitator (sharing this database and chain) or a remote one
(`X402_FACILITATOR_URL`), and is booked in the ledger, whose webhook events a delivery worker sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.server.agent_execution import AgentExecutor
from a2a.types import AgentExtension, Message
from fastapi import FastAPI
from google.protobuf.struct_pb2 import Struct
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from a2a_x402.agentcard import (
    JWKS_PATH,
    CardReading,
    JwksCache,
    KeyStore,
    KeyStoreError,
    SigningKey,
    jwks_url,
    load_signing_key,
    load_signing_keys_from_env,
    sign_card,
)
from a2a_x402.cli import ConfigError
from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V01, EXTENSION_URI_V02
from a2a_x402.facilitator import (
    ChainStatus,
    Facilitator,
    FacilitatorClient,
    HttpFacilitatorClient,
    RpcClient,
    read_chain_status,
)
from a2a_x402.facilitator.wire import chain_id_from_caip2
from a2a_x402.observability import (
    metrics_route,
    readiness_route,
    redact_values,
    service_version,
    settings_secrets,
)
from a2a_x402.storage import create_engine

from ._health import merchant_checks
from ._metrics import MerchantMetrics, TimedFacilitator
from ._no_store import NoStoreMiddleware
from .callers import Authenticator, CallerKeys, JwtIssuer, JwtVerifier, merge_issuers
from .dashboard import (
    EXPLORERS,
    AssetInfo,
    DashboardAuth,
    DashboardData,
    DifferenceDesk,
    LoginThrottle,
    SessionStore,
    create_dashboard_router,
    is_local_chain,
    origin_of,
)
from .demo_skill import TEXT_STATS_SKILL, TextStatsExecutor
from .differences import DifferenceStore
from .edge import (
    AgentCardSettings,
    CardSigner,
    RequestLimits,
    TenantTaskStore,
    create_app,
    grpc_listen_address,
)
from .ledger import Ledger
from .payments import (
    Asset,
    OfferReader,
    OfferStore,
    PaymentExecutor,
    PaymentRecovery,
    PaymentRequestHandler,
    Presentations,
    Pricing,
    UnpaidRules,
    UnpaidWork,
)
from .reconciler import Reconciler, ReconcileReport
from .settings import MerchantSettings
from .tenants import DEFAULT_TENANT, DEFAULT_TENANT_SEGMENT, Tenant, TenantRegistry
from .webhooks import DeliveryWorker, Outbox, WebhookEndpoints, create_billing_router, endpoint_configs

__all__ = [
    "MERCHANT_SKILLS",
    "build_app",
    "build_reconciler",
    "card_signing_keys",
    "load_tenants",
    "payment_extension",
    "request_limits",
]

MERCHANT_SKILLS = (TEXT_STATS_SKILL,)
"""The skills the reference merchant offers (its card lists them; `skill_prices` keys must name one)."""

logger = logging.getLogger(__name__)

_PROBE_RPC_TIMEOUT_S = 3.0
"""Timeout of the chain reads of `/readyz` and `/metrics` with a remote facilitator."""


def payment_extension(
    pricing: Pricing,
    uri: str = EXTENSION_URI,
    *,
    required: bool = True,
    tenant: str | None = None,
    name_tenants: bool = True,
) -> AgentExtension:
    """The card's declaration of the x402 extension version `uri`, with what is accepted and who is paid
    (every tenant's payTo, or with `tenant` only that tenant's, for its extended card and its own cards).

    A named tenant's 0.3 card (`name_tenants=False`) names no tenant in its `payTo` entries: its interfaces
    carry none (on 0.3 the URL is the tenant), and a reader takes a missing `tenant` as the interface's.

    The default tenant's `payTo` entries carry no `tenant` member (clients read a missing one as `""`): the
    a2a-sdk's card verifier drops empty strings before checking a signature (docs/guides/agent-cards.md,
    "Empty fields"), so a signed `"tenant": ""` would make the SDK refuse the merchant's card.
    """
    params = Struct()
    params.update(
        {
            "networks": [pricing.asset.network],
            "assets": [
                {
                    "network": pricing.asset.network,
                    "address": pricing.asset.address,
                    "name": pricing.asset.name,
                    "version": pricing.asset.version,
                    "decimals": pricing.asset.decimals,
                }
            ],
            "payTo": [
                {"network": pricing.asset.network, "address": t.pay_to}
                | ({"tenant": t.id} if t.id and name_tenants else {})
                for t in pricing.tenants
                if tenant is None or t.id == tenant
            ],
        }
    )
    return AgentExtension(
        uri=uri,
        description="Payments for skills with x402 (EIP-3009 transferWithAuthorization).",
        required=required,
        params=params,
    )


def _skill_of(_message: Message) -> str:
    return TEXT_STATS_SKILL.id


def card_signing_keys(settings: MerchantSettings) -> list[SigningKey]:
    """The Agent Card signing keys `settings` configure (none: cards are unsigned), read from disk.

    Keys come from `X402_CARD_KEYS_DIR` (a key store the `keys` commands manage), or else from
    `X402_CARD_SIGNING_KEY_FILE` (one PEM or JWK private key, e.g. a mounted secret), or else from
    `X402_CARD_SIGNING_KEYS` (PEM private keys, a private JWK or a JWK Set, e.g. from a secret manager).

    Raises:
        KeyStoreError: the key directory holds no active key, or a key file in it is unreadable.
        KeyLoadError: the key file or `X402_CARD_SIGNING_KEYS` holds no usable key.
    """
    if settings.card_keys_dir is not None:
        store = KeyStore(settings.card_keys_dir)
        keys = store.signing_keys()
        if not keys:
            # A configured directory without a key must not quietly serve an unsigned card.
            raise KeyStoreError(
                f"no active signing key in {store.directory}: run `x402-merchant keys generate`"
            )
        return keys
    if settings.card_signing_key_file is not None:
        return [load_signing_key(settings.card_signing_key_file)]
    if settings.card_signing_keys is not None:
        return load_signing_keys_from_env(
            "X402_CARD_SIGNING_KEYS",
            environ={"X402_CARD_SIGNING_KEYS": settings.card_signing_keys.get_secret_value()},
        )
    return []


def _card_signing(settings: MerchantSettings) -> tuple[CardSigner | None, list[BaseRoute]]:
    """The card signer and the JWKS route, when signing keys are configured (read once, at startup).

    Raises:
        KeyStoreError: the key directory holds no active key, or a key file in it is unreadable.
        KeyLoadError: the key file or `X402_CARD_SIGNING_KEYS` holds no usable key.
    """
    keys = card_signing_keys(settings)
    if not keys:
        return None, []
    jwks = {"keys": [key.public_jwk() for key in keys]}
    jku = jwks_url(settings.base_url)

    def sign(card: dict[str, Any]) -> dict[str, Any]:
        # Every reading: a 0.3 client's a2a-sdk reads a card differently from ours and from a 1.x client's.
        return sign_card(card, keys, jku=jku, readings=tuple(CardReading))

    async def serve_jwks(_request: Request) -> JSONResponse:
        return JSONResponse(jwks, headers={"Cache-Control": "public, max-age=300"})

    return sign, [Route(JWKS_PATH, serve_jwks, methods=["GET"])]


def _grpc_addresses(settings: MerchantSettings) -> tuple[str | None, str | None]:
    """Where the gRPC binding listens (`X402_HOST`) and the address the card gives for it (the host of
    `X402_PUBLIC_URL` when set), both at `X402_GRPC_PORT`; (None, None) when gRPC is off."""
    if settings.grpc_port is None:
        return None, None
    public_host = urlsplit(settings.public_url).hostname if settings.public_url else None
    return (
        grpc_listen_address(settings.host, settings.grpc_port),
        grpc_listen_address(public_host or settings.host, settings.grpc_port),
    )


def request_limits(settings: MerchantSettings) -> RequestLimits:
    """The bounds of one request on every binding, from `settings` (`X402_MAX_*`, `X402_*_TIMEOUT_S`)."""
    return RequestLimits(
        max_body_bytes=settings.max_body_bytes,
        max_parts=settings.max_parts,
        max_metadata_bytes=settings.max_metadata_bytes,
        max_metadata_depth=settings.max_metadata_depth,
        max_header_count=settings.max_header_count,
        max_header_bytes=settings.max_header_bytes,
        header_timeout_s=settings.header_timeout_s,
        body_timeout_s=settings.body_timeout_s,
    )


def load_tenants(settings: MerchantSettings) -> TenantRegistry:
    """The tenants `settings` name: its tenants file (read from disk), or only the default tenant;
    `X402_API_TOKEN` is the default tenant's API token either way, and `X402_ANONYMOUS_CALLERS=false` closes
    the default tenant to callers without credentials either way.

    Raises:
        TenantConfigError: the tenants file is unreadable or invalid.
        cli.ConfigError: `X402_API_TOKEN` is set, but the file has no default tenant or gives it a token too.
    """
    token = settings.api_token.get_secret_value() if settings.api_token is not None else None
    if not settings.tenants_file:
        own_default = Tenant(
            id=DEFAULT_TENANT,
            pay_to=settings.pay_to or "",
            price=settings.price,
            api_token=token,
            anonymous_callers=settings.anonymous_callers,
        )
        return TenantRegistry([own_default])
    registry = TenantRegistry.from_toml(settings.tenants_file)
    if not settings.anonymous_callers:
        registry = TenantRegistry(
            dataclasses.replace(tenant, anonymous_callers=False) if tenant.id == DEFAULT_TENANT else tenant
            for tenant in registry
        )
    if token is None:
        return registry
    default = registry.get(DEFAULT_TENANT)
    if default is None:
        raise ConfigError(
            f"is the default tenant's token, but {settings.tenants_file} declares no [default] tenant: "
            "add one, or unset X402_API_TOKEN",
            variable="X402_API_TOKEN",
        )
    if default.api_token is not None:
        raise ConfigError(
            f"is set and {settings.tenants_file} gives the [default] tenant an api_token too: keep one",
            variable="X402_API_TOKEN",
        )
    return TenantRegistry(
        dataclasses.replace(tenant, api_token=token) if tenant.id == DEFAULT_TENANT else tenant
        for tenant in registry
    )


def build_authenticator(
    settings: MerchantSettings,
    engine: AsyncEngine,
    http: httpx.AsyncClient,
    tenants: TenantRegistry | None = None,
) -> Authenticator:
    """The merchant's authenticator: the API keys in `engine`'s `callers` table, the bearer JWTs of the
    `X402_JWT_*` issuer at every tenant, and those of each tenant's own `jwt_issuers` (tenants file) at
    that tenant only (keys fetched with `http`; plain http only on loopback)."""
    issuers: list[JwtIssuer] = []
    if settings.jwt_issuer and settings.jwt_audience and settings.jwt_jwks_url:
        issuers.append(
            JwtIssuer(
                issuer=settings.jwt_issuer, audience=settings.jwt_audience, jwks_url=settings.jwt_jwks_url
            )
        )
    for tenant in tenants or ():
        issuers.extend(
            JwtIssuer(
                issuer=own.issuer,
                audience=own.audience,
                jwks_url=own.jwks_url,
                tenants=frozenset({tenant.id}),
            )
            for own in tenant.jwt_issuers
        )
    # One cache per transport rule; both key their sets by URL, so tenants sharing an issuer share its keys.
    secure, insecure = JwksCache(http), JwksCache(http, allow_insecure_localhost=True)
    verifiers = [
        # plain http is refused unless on loopback (check_jku)
        JwtVerifier(issuer, insecure if urlsplit(issuer.jwks_url).scheme == "http" else secure)
        for issuer in merge_issuers(issuers)
    ]
    return Authenticator(CallerKeys(engine), verifiers)


def build_reconciler(
    settings: MerchantSettings,
    *,
    engine: AsyncEngine,
    facilitator: FacilitatorClient,
    offers: OfferStore,
    ledger: Ledger,
    tenants: TenantRegistry | None = None,
    on_report: Callable[[ReconcileReport], None] | None = None,
    tasks: TenantTaskStore | None = None,
    rpc: RpcClient | None = None,
) -> Reconciler:
    """The reconciler of a merchant on `engine`, reading the chain at `settings.rpc_url`; it watches the
    payTo of every tenant (`tenants`, or those `settings` name), and tells `on_report` what each pass did.
    `tasks` is the task store of the app it runs beside, so that the app's requests see its saves. `rpc`
    (default: a new client of `settings.rpc_url`) is the reconciler's to close."""
    if rpc is None:
        rpc = RpcClient(settings.rpc_url)
    recovery = PaymentRecovery(
        offers=offers,
        facilitator=facilitator,
        ledger=ledger,
        chain=rpc,
        tasks=tasks if tasks is not None else TenantTaskStore(engine, on_final=offers.told_in),
        stale_after_s=settings.reconcile_stale_after_s,
        settle_timeout_s=settings.settle_timeout_s,
    )
    return Reconciler(
        facilitator=facilitator,
        recovery=recovery,
        offers=offers,
        ledger=ledger,
        rpc=rpc,
        confirmations=settings.confirmations,
        asset=settings.asset,
        chain_id=chain_id_from_caip2(settings.network),
        pay_tos=[tenant.pay_to for tenant in (load_tenants(settings) if tenants is None else tenants)],
        lookback_blocks=settings.reconcile_lookback_blocks,
        on_report=on_report,
        differences=DifferenceStore(engine),
    )


def build_app(
    settings: MerchantSettings,
    *,
    tenants: TenantRegistry | None = None,
    delegate: AgentExecutor | None = None,
) -> FastAPI:
    """The reference merchant app for `settings`; connections open in the app's lifespan.

    `delegate` does the paid work of the text-stats skill (default: `TextStatsExecutor`); tests put an
    executor there that fails or waits, to exercise the payment layer around it.
    """
    if tenants is None:
        tenants = load_tenants(settings)
    # Whatever logs them (a dependency at DEBUG, an exception's text), these never reach a log line.
    redact_values(_secrets(settings, tenants))
    engine = create_engine(settings.database_url)
    asset = Asset(
        network=settings.network,
        address=settings.asset,
        name=settings.asset_name,
        version=settings.asset_version,
        decimals=settings.asset_decimals,
    )
    # The artifact's main part is the JSON statistics (the skill's first output mode).
    pricing = Pricing(
        tenants,
        asset,
        resource_url=settings.base_url,
        mime_types={TEXT_STATS_SKILL.id: TEXT_STATS_SKILL.output_modes[0]},
    )
    facilitator: FacilitatorClient = (
        HttpFacilitatorClient(settings.facilitator_url, api_key=settings.remote_facilitator_key())
        if settings.facilitator_url
        else Facilitator.from_settings(settings.facilitator_settings(), engine=engine)
    )
    outbox = Outbox(engine)
    ledger = Ledger(engine, outbox)
    offers = OfferStore(engine, events=outbox)
    unpaid = UnpaidWork(
        engine,
        tenants=tenants,
        defaults=UnpaidRules(
            max_awaiting=settings.max_unpaid_tasks,
            max_per_minute=settings.max_unpaid_per_minute,
            retention_s=settings.unpaid_retention_s,
        ),
        offer_timeout_s=pricing.max_timeout_seconds,
    )
    metrics = MerchantMetrics(CollectorRegistry())
    # The merchant's own node: paid turns book what it shows, and the reconciler (which closes it) reads it.
    chain_rpc = RpcClient(settings.rpc_url)
    executor = PaymentExecutor(
        delegate if delegate is not None else TextStatsExecutor(),
        pricing=pricing,
        facilitator=TimedFacilitator(facilitator, metrics),
        offers=offers,
        ledger=ledger,
        chain=chain_rpc,
        skill_of=_skill_of,
        settle_timeout_s=settings.settle_timeout_s,
        on_outcome=metrics.payment,
        unpaid=unpaid,
    )
    # One store for the requests and the reconciler: a request's remembered read is stale once either saves.
    task_store = TenantTaskStore(engine, on_final=offers.told_in)
    reconciler = build_reconciler(
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
    )
    operations = [metrics_route(metrics.registry, scraped), readiness_route(checks)]
    signer, jwks_routes = _card_signing(settings)
    grpc_listen, grpc_url = _grpc_addresses(settings)

    def api_token_of(tenant: str) -> str | None:
        return getattr(tenants.get(tenant), "api_token", None)

    # One count of wrong tokens per tenant and address for the billing API and the dashboard together.
    throttle = LoginThrottle()
    billing = create_billing_router(
        ledger=ledger,
        outbox=outbox,
        api_token_of=api_token_of,
        default_tenant_segment=DEFAULT_TENANT_SEGMENT,
        throttle=throttle,
        limits_of=unpaid.describe,
    )
    dashboard = create_dashboard_router(
        data=DashboardData(
            ledger=ledger,
            outbox=outbox,
            endpoints=WebhookEndpoints(engine),
            reconciler=reconciler,
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
        explorers={} if is_local_chain(settings.rpc_url, settings.facilitator_url) else EXPLORERS,
        differences=DifferenceDesk(DifferenceStore(engine), ledger, settings.network),
    )
    jwks_http = httpx.AsyncClient()
    authenticator = build_authenticator(settings, engine, jwks_http, tenants)
    app = create_app(
        authenticator=authenticator,
        executor=executor,
        engine=engine,
        task_store=task_store,
        tenants=tenants,
        card=AgentCardSettings(
            name="x402 reference merchant",
            description="Text statistics, paid per request in USDC over the A2A x402 extension.",
            version="0.1.0",
            base_url=settings.base_url,
            skills=list(MERCHANT_SKILLS),
            grpc_url=grpc_url,
            extensions=[payment_extension(pricing)],
            tenant_extensions=lambda tenant: [payment_extension(pricing, tenant=tenant)],
            # A2A 0.3 clients speak extension v0.2; v0.1 has the same wire form (accepted, not required).
            extensions_v0_3=[
                payment_extension(pricing, EXTENSION_URI_V02),
                payment_extension(pricing, EXTENSION_URI_V01, required=False),
            ],
            tenant_extensions_v0_3=lambda tenant: [
                payment_extension(
                    pricing, uri, required=uri == EXTENSION_URI_V02, tenant=tenant, name_tenants=False
                )
                for uri in (EXTENSION_URI_V02, EXTENSION_URI_V01)
            ],
        ),
        routes=[*operations, *jwks_routes, *billing.routes, *dashboard.routes],
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
                skill_of=_skill_of,
                progress_timeout_s=settings.settle_timeout_s,
                unpaid=unpaid,
            )
        ],
    )
    app.add_middleware(NoStoreMiddleware, prefixes=("/tenants/",))
    edge_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: FastAPI) -> AsyncIterator[None]:
        if isinstance(facilitator, Facilitator):
            await facilitator.startup_checks()
        http = httpx.AsyncClient()
        endpoints = WebhookEndpoints(engine)
        await endpoints.sync(endpoint_configs(tenants))
        worker = DeliveryWorker(
            engine, http, allow_private_targets=settings.webhooks_allow_private, on_outcome=metrics.delivery
        )
        stop = asyncio.Event()
        delivery = asyncio.create_task(worker.run(stop), name="webhook-delivery")
        reconciling = asyncio.create_task(
            reconciler.run(stop, interval_s=settings.reconcile_interval_s), name="reconciler"
        )
        purging = asyncio.create_task(
            unpaid.run(stop, interval_s=settings.unpaid_purge_interval_s, on_purge=metrics.purged),
            name="unpaid-purge",
        )
        try:
            async with edge_lifespan(app_):
                _log_startup(settings, tenants, signed=signer is not None)
                yield
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(delivery, reconciling, purging)
            await http.aclose()
            await jwks_http.aclose()
            await reconciler.aclose()
            if probe_rpc is not None:
                await probe_rpc.aclose()
            await facilitator.aclose()
            await engine.dispose()

    app.router.lifespan_context = lifespan
    return app


def _secrets(settings: MerchantSettings, tenants: TenantRegistry) -> list[str]:
    """Every secret the merchant was configured with: its settings' and each tenant's token and webhook
    secrets."""
    found = settings_secrets(settings) + [config.secret for config in endpoint_configs(tenants)]
    for tenant in tenants:
        found += [tenant.api_token or "", tenant.webhook_secret or ""]
    return found


def _log_startup(settings: MerchantSettings, tenants: TenantRegistry, *, signed: bool) -> None:
    """The line saying the merchant serves: where, version, facilitator mode, network, tenants, cards."""
    if settings.facilitator_url:
        # Only scheme, host and port: a URL's user info or query may hold credentials.
        parts = urlsplit(settings.facilitator_url)
        mode = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    else:
        mode = "in-process"
    count = len(list(tenants))
    address = f"{settings.host}:{settings.port}"
    logger.info(
        "merchant %s serving at http://%s on %s: facilitator %s, %d tenant%s, cards %s",
        service_version(),
        address,
        settings.network,
        mode,
        count,
        "" if count == 1 else "s",
        "signed" if signed else "unsigned",
        extra={
            "address": address,
            "version": service_version(),
            "facilitator": mode,
            "network": settings.network,
            "tenants": count,
            "cards_signed": signed,
        },
    )
