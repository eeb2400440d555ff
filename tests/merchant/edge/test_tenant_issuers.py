"""A tenant's own JWT issuer, served for real: its tokens reach that tenant's tasks on every binding and
nothing at any other tenant, and each card declares bearer JWTs only where an issuer is trusted."""

from __future__ import annotations

import httpx
import pytest

from a2a_x402.merchant.callers import JwtIssuer
from a2a_x402.merchant.edge import AGENT_CARD_PATH, tenant_root
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.jwt_issuer import AUDIENCE, Issuer
from tests.fixtures.merchant import A2ACallError
from tests.fixtures.servers import free_port

from .conftest import PAY_TO, TENANT_A, TENANT_B, a2a_http_as, running_merchant
from .test_caller_scope import WIRES, expect_not_found, stored_tasks, wire_of
from .wire import mid, start_quote, user_message


def closed_tenants() -> TenantRegistry:
    """Every tenant serves only callers with credentials, so a foreign token can never pass as anonymous."""
    return TenantRegistry(
        Tenant(id=tenant_id, pay_to=pay_to, price=1000, anonymous_callers=False)
        for tenant_id, pay_to in PAY_TO.items()
    )


def own_issuer(issuer: Issuer, tenant: str) -> JwtIssuer:
    return JwtIssuer(
        issuer=issuer.url, audience=AUDIENCE, jwks_url=issuer.jwks_url, tenants=frozenset({tenant})
    )


@pytest.mark.parametrize("wire_name", WIRES)
async def test_a_tenants_own_issuer_opens_that_tenant_only_on_every_binding(
    wire_name: str, sqlite_url: str, jwt_issuer: Issuer
) -> None:
    with running_merchant(
        sqlite_url,
        grpc_port=free_port(),
        tenants=closed_tenants(),
        jwt_issuers=[own_issuer(jwt_issuer, TENANT_A)],
    ) as url:
        async with (
            a2a_http_as(url, jwt_issuer.token("svc-a")) as owner_http,
            a2a_http_as(url, jwt_issuer.token("svc-b")) as stranger_http,
        ):
            owner, stranger = (
                wire_of(wire_name, owner_http, TENANT_A),
                wire_of(wire_name, stranger_http, TENANT_A),
            )
            task = await start_quote(owner)  # type: ignore[arg-type]
            await expect_not_found(stranger.get_task(task["id"]))
            assert [t["id"] for t in (await owner.list_tasks())["tasks"]] == [task["id"]]
            before = await stored_tasks(sqlite_url)

            for tenant in ("", TENANT_B):
                elsewhere = wire_of(wire_name, owner_http, tenant)
                with pytest.raises(A2ACallError) as failure:
                    await elsewhere.send(user_message("hello", message_id=mid()))
                assert failure.value.reason == "INVALID_REQUEST"
                with pytest.raises(A2ACallError):
                    await elsewhere.list_tasks()
                with pytest.raises(A2ACallError):
                    await elsewhere.get_task(task["id"])
            assert await stored_tasks(sqlite_url) == before


async def card_requirements(http: httpx.AsyncClient, path: str) -> list[dict[str, object]]:
    card = (await http.get(path, headers={"A2A-Version": "1.0"})).json()
    requirements: list[dict[str, object]] = card.get("securityRequirements", [])
    return requirements


async def test_each_card_declares_bearer_jwts_only_where_an_issuer_is_trusted(
    sqlite_url: str, jwt_issuer: Issuer
) -> None:
    api_key: dict[str, object] = {"schemes": {"apiKey": {}}}
    jwt: dict[str, object] = {"schemes": {"bearerJwt": {}}}
    with running_merchant(
        sqlite_url, tenants=closed_tenants(), jwt_issuers=[own_issuer(jwt_issuer, TENANT_A)]
    ) as url:
        async with httpx.AsyncClient(timeout=HANG_S, base_url=url) as http:
            at_a = await card_requirements(http, tenant_root(TENANT_A) + AGENT_CARD_PATH)
            at_b = await card_requirements(http, tenant_root(TENANT_B) + AGENT_CARD_PATH)
            root = await card_requirements(http, AGENT_CARD_PATH)
            root_v0_3 = (await http.get(AGENT_CARD_PATH, headers={"A2A-Version": "0.3"})).json()

    assert at_a == [api_key, jwt]
    assert at_b == [api_key]
    assert root == [api_key, jwt]  # the root card speaks for every tenant, TENANT_A's issuer included
    assert root_v0_3["security"] == [{"apiKey": []}]  # the default tenant's: no issuer trusted there
    assert "bearerJwt" not in root_v0_3["securitySchemes"]
