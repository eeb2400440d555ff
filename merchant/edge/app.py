"""The merchant's A2A 1.0 app: any a2a-sdk `AgentExecutor` behind JSON-RPC and HTTP+JSON, per tenant.

Wiring, outermost first: the SDK's route factories (`paths` has the URL layout) → `EdgeCallContextBuilder`
(the one place the protocol version is read) → `TenantGate` (unknown tenants refused) → the SDK's
`DefaultRequestHandler` → the executor. Tasks live in the SDK's `DatabaseTaskStore` on the caller's engine,
owner-scoped by tenant and user, in the table made by migration `m0001` (never by the SDK).

The card JSON is produced in exactly one place, the SDK's card route, with an optional `card_modifier`
applied to every response; card signing plugs in there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler, RequestHandler
from a2a.server.routes import add_a2a_routes_to_fastapi, create_agent_card_routes
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import AgentCard
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from merchant.tenants import TenantRegistry
from storage import ensure_schema_current

from ._call_context import EdgeCallContextBuilder
from ._numbers import IntegralNumbersMiddleware
from ._request_context import TaskContextRequestContextBuilder
from ._routes import jsonrpc_routes, rest_routes
from ._tenancy import TenantGate, tenant_owner
from .card import AgentCardSettings, build_agent_card
from .paths import A2A_PATH_PREFIX, AGENT_CARD_PATH, HEALTH_PATH

__all__ = ["MERCHANT_SCHEMA_BRANCH", "CardModifier", "HandlerLayer", "create_app"]

MERCHANT_SCHEMA_BRANCH = "merchant"
"""The Alembic branch whose head the app requires at startup."""

CardModifier = Callable[[AgentCard], Awaitable[AgentCard]]
"""Called on every card request with the built card; returns the card to serve (e.g. signed)."""

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
    handler_layers: Sequence[HandlerLayer] = (),
    card_cache_control: str | None = _DEFAULT_CARD_CACHE_CONTROL,
    interrupted_task_timeout_s: float | None = _DEFAULT_INTERRUPTED_TASK_TIMEOUT_S,
) -> FastAPI:
    """Build the merchant's A2A app. Nothing is connected or started until the app's lifespan runs.

    Args:
        executor: the agent; any a2a-sdk `AgentExecutor` (the payment layer wraps the business one).
        engine: the database holding the `tasks` table. The caller owns it and disposes of it.
        tenants: the tenants served; each gets interfaces in the card and its own task scope.
        card: what the Agent Card says about the agent (name, skills, base URL, extensions, ...).
        routes: extra routes (JWKS, per-tenant endpoints, ...), registered before the A2A ones.
        card_modifier: applied to the card on every card request; the hook for signing.
        handler_layers: wrappers around the SDK's request handler, innermost first (the payment layer's);
            the tenant gate is always outermost.
        card_cache_control: `Cache-Control` of the card response (an ETag is always sent).
        interrupted_task_timeout_s: release a task idle in input-required / auth-required from memory
            after this many seconds; the next message resumes it from the store. None keeps every such
            task in memory until it finishes.

    Returns:
        The FastAPI app. Its lifespan checks that the `merchant` schema branch is at its head (raising
        `storage.SchemaOutdatedError` otherwise) and, on shutdown, drains the tasks still running.
    """
    agent_card = build_agent_card(card, tenants)
    task_store = DatabaseTaskStore(engine, create_table=False, owner_resolver=tenant_owner)
    inner: RequestHandler = DefaultRequestHandler(
        executor,
        task_store,
        agent_card,
        request_context_builder=TaskContextRequestContextBuilder(task_store),
        interrupted_task_timeout=interrupted_task_timeout_s,
    )
    for layer in handler_layers:
        inner = layer(inner)
    handler = TenantGate(inner, tenants)
    database_url = engine.url.render_as_string(hide_password=False)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await ensure_schema_current(database_url, MERCHANT_SCHEMA_BRANCH)
        try:
            yield
        finally:
            await handler.aclose()

    app = FastAPI(title=card.name, version=card.version, lifespan=lifespan)
    app.add_middleware(IntegralNumbersMiddleware, prefixes=(A2A_PATH_PREFIX, AGENT_CARD_PATH))
    app.router.routes.extend(routes)
    app.router.routes.append(Route(HEALTH_PATH, _healthz, methods=["GET"]))
    context_builder = EdgeCallContextBuilder()
    add_a2a_routes_to_fastapi(
        app,
        agent_card_routes=create_agent_card_routes(
            agent_card,
            card_modifier=card_modifier,
            card_url=AGENT_CARD_PATH,
            cache_control=card_cache_control,
        ),
        jsonrpc_routes=jsonrpc_routes(handler, context_builder),
        rest_routes=rest_routes(handler, context_builder),
    )
    return app


async def _healthz(_request: Request) -> JSONResponse:
    """Liveness: the process serves requests."""
    return JSONResponse({"status": "ok"})
