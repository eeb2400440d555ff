"""The merchant's A2A app: any a2a-sdk `AgentExecutor` behind JSON-RPC and HTTP+JSON, per tenant.

A2A 1.0 is served to every tenant; A2A 0.3 (through the SDK's compatibility layer, which converts 0.3
requests to 1.0 before the handlers see them and the answers back) to every tenant too: to the default
tenant at the root URLs, and, since a 0.3 request names no tenant, to each named tenant at URLs of its own
under `paths.TENANT_ROOT_PATH`, with its own cards there. Wiring, outermost first: the routes (`paths` has
the URL layout), each negotiating the version through one `VersionNegotiator` → `EdgeCallContextBuilder`
(which hands the negotiated version on) → `RememberFailures` (the A2A error of a call, for the 0.3 routes
to name) → `TenantGate` (unknown tenants refused) → `CallerScope` (the caller rules: anonymous callers,
credentials of another tenant) → the handler layers (the payment layer's) → `EndedTaskRefusals` (a message
meeting its task being closed refused as one to a finished task) → the SDK's `DefaultRequestHandler` → the
executor. Tasks live in `TenantTaskStore` (the SDK's `DatabaseTaskStore` with one-statement saves and
reads) on the caller's engine, owner-scoped by tenant and caller (the principal
`_authn.AuthenticationGate` authenticated, before the routes, or anonymous), in the table made by
migration `m0001` (never by the SDK).

The card bytes are produced in exactly one place, `card.render_agent_card`, per version, after the
optional `card_modifier`; card signing plugs in there. With `tenant_extensions` in the card settings, each
tenant's extended card is served through the SDK handler's extended-card hook (`ExtendedAgentCards`),
rendered and signed the same way.

With `grpc_listen`, the same handler is also served over gRPC (`_grpc`), by a server the app's lifespan
starts and stops, and the card lists it (at `card.grpc_url`, by default the listen address).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler, RequestHandler
from a2a.server.routes import add_a2a_routes_to_fastapi
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route

from a2a_x402.merchant.callers import Authenticator
from a2a_x402.merchant.tenants import DEFAULT_TENANT, TenantRegistry
from a2a_x402.storage import ensure_schema_current

from ._active_tasks import EndedTaskRefusals, close_refused_tasks
from ._authn import AuthenticationGate
from ._bounded import BoundedRequestsMiddleware
from ._call_context import EdgeCallContextBuilder
from ._caller_scope import CallerScope
from ._card_route import AgentCardEndpoint, CardModifier, CardSigner, ExtendedAgentCards, TenantCardEndpoints
from ._echo import ProtocolEcho
from ._failures import RememberFailures
from ._grpc import GrpcEdge
from ._limits import RequestLimits
from ._log_redaction import install_log_redaction
from ._numbers import IntegralNumbersMiddleware
from ._request_context import TaskContextRequestContextBuilder
from ._routes import jsonrpc_routes, rest_routes, tenant_v0_3_routes
from ._sdk_log_levels import install_sdk_log_levels
from ._slashes import TrailingSlashMiddleware
from ._task_store import TenantTaskStore
from ._tenancy import TenantGate
from .card import (
    AgentCardSettings,
    CardSettingsError,
    build_agent_card,
    build_extended_agent_card,
    build_tenant_agent_card,
    served_versions,
)
from .paths import AGENT_CARD_PATH, HEALTH_PATH, TENANT_ROOT_PATH, is_a2a_path
from .versions import ProtocolVersion, VersionNegotiator

__all__ = ["MERCHANT_SCHEMA_BRANCH", "CardModifier", "CardSigner", "HandlerLayer", "create_app"]

MERCHANT_SCHEMA_BRANCH = "merchant"
"""The Alembic branch whose head the app requires at startup."""

HandlerLayer = Callable[[RequestHandler], RequestHandler]
"""Wraps a request handler in another that adds behaviour (see `merchant._handlers`)."""


_DEFAULT_CARD_CACHE_CONTROL = "public, max-age=300"
# Quotes waiting for payment are often abandoned; without a release the SDK keeps each one in memory forever.
_DEFAULT_INTERRUPTED_TASK_TIMEOUT_S = 600.0


def create_app(
    *,
    executor: AgentExecutor,
    engine: AsyncEngine,
    tenants: TenantRegistry,
    card: AgentCardSettings,
    routes: Sequence[BaseRoute] = (),
    card_modifier: CardModifier | None = None,
    card_signer: CardSigner | None = None,
    handler_layers: Sequence[HandlerLayer] = (),
    card_cache_control: str = _DEFAULT_CARD_CACHE_CONTROL,
    interrupted_task_timeout_s: float | None = _DEFAULT_INTERRUPTED_TASK_TIMEOUT_S,
    task_store: TenantTaskStore | None = None,
    grpc_listen: str | None = None,
    api_docs: bool = False,
    limits: RequestLimits | None = None,
    authenticator: Authenticator | None = None,
) -> FastAPI:
    """Build the merchant's A2A app. Nothing is connected or started until the app's lifespan runs.

    Args:
        executor: the agent; any a2a-sdk `AgentExecutor` (the payment layer wraps the business one).
        engine: the database holding the `tasks` table. The caller owns it and disposes of it.
        tenants: the tenants served; each gets interfaces in the card and its own task scope, and each named
            one its 0.3 interfaces and cards under its own root.
        card: what the Agent Card says about the agent (name, skills, base URL, extensions, ...).
        routes: extra routes (JWKS, per-tenant endpoints, ...), registered before the A2A ones.
        card_modifier: applied to the card of the requested version on every card request.
        card_signer: signs every card served (each version's, each tenant's extended card), over exactly
            the bytes served.
        handler_layers: wrappers around the SDK's request handler, innermost first (the payment layer's);
            the tenant gate is always outermost.
        card_cache_control: `Cache-Control` of the card responses; must set a `max-age` (an ETag and
            `Vary: A2A-Version` are always sent).
        interrupted_task_timeout_s: release a task idle in input-required / auth-required from memory
            after this many seconds; the next message resumes it from the store. None keeps every such
            task in memory until it finishes.
        task_store: where tasks live; by default a `TenantTaskStore` on `engine` with no final-state hook.
        grpc_listen: `host:port` to serve the gRPC binding at as well (`_grpc.grpc_listen_address`); the
            card lists it at `card.grpc_url`, or at this address when that is unset.
        api_docs: serve the OpenAPI schema at `/openapi.json` (`X402_API_DOCS`); `/docs` and `/redoc` are
            never served.
        limits: the bounds of one request on every binding (`RequestLimits`: body size and read time,
            parts, metadata, gRPC message and metadata size); `RequestLimits()` by default. The header
            bounds are the HTTP server's (`cli.bounded_http_protocol`).
        authenticator: authenticates every A2A request on every binding (`_authn`); None serves every
            request as an anonymous caller. Either way the caller rules apply (`_caller_scope`).

    Returns:
        The FastAPI app. Its lifespan checks that the `merchant` schema branch is at its head (raising
        `storage.SchemaOutdatedError` otherwise) and, on shutdown, drains the tasks still running.

    Raises:
        CardSettingsError: `card_cache_control` sets no `max-age`, or `card.grpc_url` is set without
            `grpc_listen` (the card would list a binding that is not served).
    """
    if "max-age=" not in card_cache_control:
        raise CardSettingsError(f"card_cache_control must set a max-age, got {card_cache_control!r}")
    if grpc_listen is None and card.grpc_url is not None:
        raise CardSettingsError("card.grpc_url is set, but gRPC is not served (no grpc_listen)")
    if grpc_listen is not None and card.grpc_url is None:
        card = dataclasses.replace(card, grpc_url=grpc_listen)
    if authenticator is not None and not card.caller_schemes:
        card = dataclasses.replace(card, caller_schemes=authenticator.schemes)
    if authenticator is not None and card.tenant_caller_schemes is None:
        card = dataclasses.replace(card, tenant_caller_schemes=authenticator.schemes_at)
    negotiator = VersionNegotiator(served_versions(tenants))
    cards = {version: build_agent_card(card, tenants, version) for version in negotiator.supported}
    echo = ProtocolEcho(
        {
            ProtocolVersion.V1_0: frozenset(e.uri for e in card.extensions),
            ProtocolVersion.V0_3: frozenset(e.uri for e in card.extensions_v0_3),
        }
    )
    task_store = task_store if task_store is not None else TenantTaskStore(engine)
    extended = (
        ExtendedAgentCards(
            {tenant.id: build_extended_agent_card(card, tenants, tenant.id) for tenant in tenants},
            signer=card_signer,
        )
        if card.tenant_extensions is not None
        else None
    )
    install_log_redaction()
    install_sdk_log_levels()
    sdk_handler = DefaultRequestHandler(
        executor,
        task_store,
        cards[ProtocolVersion.V1_0],
        request_context_builder=TaskContextRequestContextBuilder(task_store),
        # The SDK insists on a card here; `for_request` answers with the caller's tenant's card instead.
        extended_agent_card=cards[ProtocolVersion.V1_0] if extended is not None else None,
        extended_card_modifier=extended.for_request if extended is not None else None,
        interrupted_task_timeout=interrupted_task_timeout_s,
        validate_input_modes=True,
    )
    close_refused_tasks(sdk_handler)
    inner: RequestHandler = EndedTaskRefusals(sdk_handler)
    for layer in handler_layers:
        inner = layer(inner)
    handler = RememberFailures(TenantGate(CallerScope(inner, tenants, task_store), tenants))
    database_url = engine.url.render_as_string(hide_password=False)
    limits = limits if limits is not None else RequestLimits()
    grpc_edge = (
        GrpcEdge(
            handler,
            listen=grpc_listen,
            declared_extensions=frozenset(e.uri for e in card.extensions),
            limits=limits,
            authenticator=authenticator,
        )
        if grpc_listen is not None
        else None
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await ensure_schema_current(database_url, MERCHANT_SCHEMA_BRANCH)
        try:
            if grpc_edge is not None:
                await grpc_edge.start()  # a port it cannot take still closes the handler
            yield
        finally:
            if grpc_edge is not None:
                await grpc_edge.stop()
            await handler.aclose()

    # No redirects to a slashed path: under the A2A prefix the slash is trimmed before routing, so a path
    # that only the slashed form would route (`/a2a/rest/{tenant}`, a Mount) would redirect for ever.
    # No interactive docs ever (they load unpinned JavaScript from a CDN); the schema alone on request.
    app = FastAPI(
        title=card.name,
        version=card.version,
        lifespan=lifespan,
        redirect_slashes=False,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if api_docs else None,
    )
    # The card renders its own integers: its ETag is computed over the exact bytes it sends.
    app.add_middleware(IntegralNumbersMiddleware, applies=is_a2a_path)
    if authenticator is not None:
        app.add_middleware(AuthenticationGate, authenticator=authenticator)
    # The path is settled before anything reads it.
    app.add_middleware(TrailingSlashMiddleware, applies=is_a2a_path)
    # Outermost: a request over its bounds is refused before anything (authentication included) runs.
    app.add_middleware(BoundedRequestsMiddleware, limits=limits)
    app.router.routes.extend(routes)
    app.router.routes.append(Route(HEALTH_PATH, _healthz, methods=["GET"]))
    context_builder = EdgeCallContextBuilder(negotiator)
    card_endpoint = AgentCardEndpoint(
        cards,
        negotiator=negotiator,
        modifier=card_modifier,
        cache_control=card_cache_control,
        signer=card_signer,
    )
    add_a2a_routes_to_fastapi(
        app,
        agent_card_routes=[Route(AGENT_CARD_PATH, card_endpoint.serve, methods=["GET"])],
        jsonrpc_routes=jsonrpc_routes(handler, context_builder, negotiator, echo),
        rest_routes=rest_routes(handler, context_builder, negotiator, echo),
    )
    app.router.routes.append(
        _tenant_roots(card, tenants, handler, echo, card_modifier, card_signer, card_cache_control)
    )
    return app


def _tenant_roots(
    card: AgentCardSettings,
    tenants: TenantRegistry,
    handler: RequestHandler,
    echo: ProtocolEcho,
    card_modifier: CardModifier | None,
    card_signer: CardSigner | None,
    card_cache_control: str,
) -> Mount:
    """The named tenants' roots: each one's cards and A2A 0.3 routes, the tenant taken from the URL."""
    # Both versions are negotiated there, so a 1.0 request is told where 1.0 is served rather than that
    # its version is unknown; only the cards are served in 1.0.
    negotiator = VersionNegotiator((ProtocolVersion.V1_0, ProtocolVersion.V0_3))
    cards = TenantCardEndpoints(
        {
            tenant.id: AgentCardEndpoint(
                {v: build_tenant_agent_card(card, tenants, tenant.id, v) for v in negotiator.supported},
                negotiator=negotiator,
                modifier=card_modifier,
                cache_control=card_cache_control,
                signer=card_signer,
            )
            for tenant in tenants
            if tenant.id != DEFAULT_TENANT
        }
    )
    context_builder = EdgeCallContextBuilder(negotiator, tenant_from_path=True)
    return Mount(
        TENANT_ROOT_PATH,
        routes=[
            Route(AGENT_CARD_PATH, cards.serve, methods=["GET"]),
            *tenant_v0_3_routes(handler, context_builder, negotiator, echo),
        ],
    )


async def _healthz(_request: Request) -> JSONResponse:
    """Liveness: the process serves requests."""
    return JSONResponse({"status": "ok"})
