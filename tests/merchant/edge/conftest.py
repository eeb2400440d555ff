"""Running merchant edges: the scripted executor, three tenants, a migrated database, real uvicorn.

`running_merchant` serves one per test (on SQLite and PostgreSQL through `database_url`); `shared_merchant`
is one per test module on SQLite, with the `MembersOnly` layer and its extension declared on both cards,
for the many small requests of the version, error and binding tables.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager

import httpx
import pytest
from a2a.server.agent_execution import AgentExecutor
from a2a.types import AgentExtension, AgentSkill
from starlette.routing import BaseRoute

from a2a_x402.agentcard import JwksCache
from a2a_x402.merchant.callers import Authenticator, CallerKeys, JwtIssuer, JwtVerifier
from a2a_x402.merchant.edge import AgentCardSettings, CardModifier, HandlerLayer, RequestLimits, create_app
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.observability import FailureThrottle
from a2a_x402.storage import create_engine, upgrade_schema
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import base_url_of, bind_loopback, free_port, serve_asgi

from .executors import ScriptedExecutor
from .layers import MEMBERS_EXTENSION, MembersOnly
from .wire import BINDINGS, Wire, binding

TENANT_A = "acme"
TENANT_B = "globex"
PAY_TO = {
    "": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    TENANT_A: "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    TENANT_B: "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
}
SKILL = AgentSkill(id="order", name="Order", description="Orders a t-shirt", tags=["commerce"])


def make_tenants() -> TenantRegistry:
    """The default tenant plus TENANT_A and TENANT_B."""
    return TenantRegistry(
        Tenant(id=tenant_id, pay_to=pay_to, price=1000) for tenant_id, pay_to in PAY_TO.items()
    )


def make_card(base_url: str, extensions: Sequence[AgentExtension] = ()) -> AgentCardSettings:
    """Card settings for a merchant reachable at `base_url`, declaring `extensions` on both versions."""
    return AgentCardSettings(
        name="Test Merchant",
        description="Sells t-shirts",
        version="1.2.3",
        base_url=base_url,
        skills=[SKILL],
        extensions=extensions,
        extensions_v0_3=extensions,
    )


@contextmanager
def running_merchant(
    database_url: str,
    *,
    sock: socket.socket | None = None,
    executor: AgentExecutor | None = None,
    routes: Sequence[BaseRoute] = (),
    card_modifier: CardModifier | None = None,
    interrupted_task_timeout_s: float | None = 600.0,
    handler_layers: Sequence[HandlerLayer] = (),
    extensions: Sequence[AgentExtension] = (),
    grpc_port: int | None = None,
    tenants: TenantRegistry | None = None,
    limits: RequestLimits | None = None,
    http: type[asyncio.Protocol] | None = None,
    api_keys: bool = True,
    jwt_issuers: Sequence[JwtIssuer] = (),
    throttle: FailureThrottle | None = None,
) -> Iterator[str]:
    """Serve a merchant edge on `database_url` and yield its base URL; its engine lives on the server loop.

    With `grpc_port`, the edge serves gRPC too, at 127.0.0.1:`grpc_port`. `tenants`: by default
    `make_tenants()`. `limits`: the edge's request bounds (`RequestLimits()` by default); `http`: the
    server's HTTP protocol (`cli.bounded_http_protocol`), uvicorn's own by default. Callers authenticate
    with the API keys of the database (`issue_key`) unless `api_keys` is false, and with the JWTs of
    `jwt_issuers` (keys fetched over plain HTTP on loopback). Refused credentials are counted by
    `throttle`; by default one that never answers 429, since the tests of the refusals' forms make many
    from one address.
    """
    sock = sock if sock is not None else bind_loopback()
    engine = create_engine(database_url)
    jwks = httpx.AsyncClient(timeout=HANG_S)
    verifiers = [
        JwtVerifier(issuer, JwksCache(jwks, allow_insecure_localhost=True, min_refetch_interval_s=1.0))
        for issuer in jwt_issuers
    ]
    authenticator = Authenticator(
        CallerKeys(engine) if api_keys else None,
        verifiers,
        throttle=FailureThrottle(max_failures=10**9) if throttle is None else throttle,
    )

    async def on_exit() -> None:
        await jwks.aclose()
        await engine.dispose()

    app = create_app(
        executor=executor or ScriptedExecutor(),
        engine=engine,
        tenants=make_tenants() if tenants is None else tenants,
        card=make_card(base_url_of(sock), extensions),
        routes=routes,
        card_modifier=card_modifier,
        interrupted_task_timeout_s=interrupted_task_timeout_s,
        handler_layers=handler_layers,
        grpc_listen=None if grpc_port is None else f"127.0.0.1:{grpc_port}",
        limits=limits,
        authenticator=authenticator,
    )
    with serve_asgi(app, sock=sock, on_exit=on_exit, http=http) as base_url:
        yield base_url


async def issue_key(database_url: str, tenant: str, name: str) -> str:
    """A new API key named `name` at `tenant`, in the database at `database_url`."""
    engine = create_engine(database_url)
    try:
        return await CallerKeys(engine).create(tenant, name)
    finally:
        await engine.dispose()


def a2a_http_as(base_url: str, token: str) -> httpx.AsyncClient:
    """An A2A 1.0 HTTP client for the merchant at `base_url` presenting the bearer `token`."""
    client = a2a_http(base_url)
    client.headers["Authorization"] = f"Bearer {token}"
    return client


def a2a_http(base_url: str) -> httpx.AsyncClient:
    """An HTTP client for the merchant at `base_url` that speaks A2A 1.0."""
    return httpx.AsyncClient(base_url=base_url, headers={"A2A-Version": "1.0"}, timeout=HANG_S)


@pytest.fixture(scope="module")
async def shared_merchant(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """Base URL of one merchant edge per test module (SQLite) with the `MembersOnly` layer; it serves gRPC
    too, at the address its card gives."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('edge') / 'x402.db'}"
    await upgrade_schema(url)
    members = AgentExtension(uri=MEMBERS_EXTENSION, description="members only", required=False)
    layers = [MembersOnly]
    with running_merchant(
        url, handler_layers=layers, extensions=[members], grpc_port=free_port()
    ) as base_url:
        yield base_url


@pytest.fixture
def merchant_url(database_url: str) -> Iterator[str]:
    """Base URL of a merchant edge on a fresh database (runs on SQLite and PostgreSQL)."""
    with running_merchant(database_url) as base_url:
        yield base_url


@pytest.fixture
async def http(merchant_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An A2A 1.0 HTTP client for `merchant_url`."""
    async with a2a_http(merchant_url) as client:
        yield client


@pytest.fixture
async def sqlite_http(sqlite_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An A2A 1.0 HTTP client for a merchant on SQLite only, for behaviour that does not touch storage."""
    with running_merchant(sqlite_url) as base_url:
        async with a2a_http(base_url) as client:
            yield client


@pytest.fixture
async def keyed_http(merchant_url: str, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An A2A 1.0 HTTP client for `merchant_url` presenting an API key of the default tenant."""
    async with a2a_http_as(merchant_url, await issue_key(database_url, "", "alice")) as client:
        yield client


@pytest.fixture
def keyed_wire(binding_name: str, keyed_http: httpx.AsyncClient) -> Wire:
    """Raw A2A calls for the default tenant over the binding under test, by an authenticated caller."""
    return binding(binding_name, keyed_http)


@pytest.fixture(params=BINDINGS)
def binding_name(request: pytest.FixtureRequest) -> str:
    """Each A2A binding in turn."""
    name: str = request.param
    return name


@pytest.fixture
def wire(binding_name: str, http: httpx.AsyncClient) -> Wire:
    """Raw A2A calls for the default tenant over the binding under test."""
    return binding(binding_name, http)
