"""A2A 0.3 for named tenants: each one's 0.3 interfaces and cards under `/t/{tenant}`, where the URL is the
tenant (a 0.3 request names none), isolated from every other tenant's exactly as on 1.0."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable, Sequence

import httpx
import pytest
from a2a.compat.v0_3 import types as compat
from a2a.types import AgentExtension

from a2a_x402.merchant.edge import (
    AGENT_CARD_PATH,
    JSONRPC_PATH,
    REST_PATH,
    AgentCardSettings,
    CardSettingsError,
    ProtocolVersion,
    build_agent_card,
    build_tenant_agent_card,
    render_agent_card,
    tenant_root,
)
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.storage import upgrade_schema
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import A2ACallError
from tests.fixtures.wire_v0_3 import BINDINGS_V0_3, WireV0_3, message_v0_3, state_of

from .conftest import PAY_TO, SKILL, TENANT_A, TENANT_B, make_card, make_tenants, running_merchant
from .executors import QUESTION
from .wire import binding, start_quote

BASE = "https://shop.example"
V02 = AgentExtension(uri="https://example.org/ext/x402/v0.2", required=True)
V03 = AgentExtension(uri="https://example.org/ext/x402/v0.3", required=True)


def _own(uri: str) -> Callable[[str], Sequence[AgentExtension]]:
    """Declarations of `uri` naming the tenant they are for."""
    return lambda tenant: [AgentExtension(uri=uri, description=f"for {tenant}", required=True)]


def _settings() -> AgentCardSettings:
    return AgentCardSettings(
        name="Test Merchant",
        description="Sells t-shirts",
        version="1.2.3",
        base_url=BASE,
        skills=[SKILL],
        extensions=[V03],
        extensions_v0_3=[V02],
        tenant_extensions=_own(V03.uri),
        tenant_extensions_v0_3=_own(V02.uri),
    )


def test_a_tenants_0_3_card_lists_its_own_0_3_urls_and_declarations() -> None:
    card = build_tenant_agent_card(_settings(), make_tenants(), TENANT_A, ProtocolVersion.V0_3)

    served = json.loads(render_agent_card(card, ProtocolVersion.V0_3))

    root = BASE + tenant_root(TENANT_A)
    assert (served["url"], served["preferredTransport"], served["protocolVersion"]) == (
        root + JSONRPC_PATH,
        "JSONRPC",
        "0.3",
    )
    assert served["additionalInterfaces"] == [
        {"url": root + JSONRPC_PATH, "transport": "JSONRPC"},
        {"url": root + REST_PATH, "transport": "HTTP+JSON"},
    ]
    assert served["capabilities"]["extensions"] == [
        {"uri": V02.uri, "description": f"for {TENANT_A}", "required": True}
    ]
    assert "supportsAuthenticatedExtendedCard" not in served
    assert compat.AgentCard.model_validate(served).url == root + JSONRPC_PATH


def test_a_tenants_1_0_card_lists_its_interfaces_of_both_versions() -> None:
    card = build_tenant_agent_card(_settings(), make_tenants(), TENANT_B, ProtocolVersion.V1_0)

    listed = [(i.url, i.protocol_binding, i.protocol_version, i.tenant) for i in card.supported_interfaces]
    root = BASE + tenant_root(TENANT_B)
    assert listed == [
        (BASE + JSONRPC_PATH, "JSONRPC", "1.0", TENANT_B),
        (BASE + REST_PATH, "HTTP+JSON", "1.0", TENANT_B),
        (root + JSONRPC_PATH, "JSONRPC", "0.3", TENANT_B),
        (root + REST_PATH, "HTTP+JSON", "0.3", TENANT_B),
    ]
    assert [(e.uri, e.description) for e in card.capabilities.extensions] == [(V03.uri, f"for {TENANT_B}")]
    assert card.capabilities.extended_agent_card


@pytest.mark.parametrize("tenant", ["", "ghost"])
def test_only_a_named_tenant_has_cards_of_its_own(tenant: str) -> None:
    with pytest.raises(CardSettingsError, match="no named tenant"):
        build_tenant_agent_card(_settings(), make_tenants(), tenant, ProtocolVersion.V0_3)


def test_the_shared_declarations_serve_when_a_tenant_has_none_of_its_own() -> None:
    card = build_tenant_agent_card(make_card(BASE, [V02]), make_tenants(), TENANT_A, ProtocolVersion.V0_3)

    assert [e.uri for e in card.capabilities.extensions] == [V02.uri]


def test_the_root_0_3_card_stays_the_default_tenants() -> None:
    card = build_agent_card(_settings(), make_tenants(), ProtocolVersion.V0_3)

    assert [(i.url, i.tenant) for i in card.supported_interfaces] == [
        (BASE + JSONRPC_PATH, ""),
        (BASE + REST_PATH, ""),
    ]


# -- served -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def edge(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """One merchant edge (SQLite) serving the default tenant, acme and globex."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('roots') / 'x402.db'}"
    await upgrade_schema(url)
    with running_merchant(url) as base_url:
        yield base_url


@pytest.mark.parametrize(
    ("headers", "version"), [({}, "0.3"), ({"A2A-Version": "0.3"}, "0.3"), ({"A2A-Version": "1.0"}, "1.0")]
)
async def test_a_tenants_card_is_served_per_version_and_revalidated(
    edge: str, headers: dict[str, str], version: str
) -> None:
    path = tenant_root(TENANT_A) + AGENT_CARD_PATH
    async with httpx.AsyncClient(timeout=HANG_S, base_url=edge) as http:
        response = await http.get(path, headers=headers)
        again = await http.get(path, headers={**headers, "If-None-Match": response.headers["etag"]})

    assert response.status_code == 200, response.text
    assert response.headers["a2a-version"] == version
    assert response.headers["etag"] == f'"{hashlib.sha256(response.content).hexdigest()}"'
    assert (again.status_code, again.headers["vary"]) == (304, "A2A-Version")
    card = response.json()
    root = edge + tenant_root(TENANT_A)
    if version == "1.0":
        assert "url" not in card
        assert {i["tenant"] for i in card["supportedInterfaces"]} == {TENANT_A}
    else:
        assert card["url"] == root + JSONRPC_PATH
        assert [i["url"] for i in card["additionalInterfaces"]] == [root + JSONRPC_PATH, root + REST_PATH]
        # Without A2A-Version: the card for both versions, as at the root, with only this tenant's interfaces.
        assert ("supportedInterfaces" in card) is (not headers)


@pytest.mark.parametrize("tenant", ["ghost", "default", "v1"])
async def test_the_card_of_a_tenant_not_served_is_404(edge: str, tenant: str) -> None:
    async with httpx.AsyncClient(timeout=HANG_S, base_url=edge) as http:
        response = await http.get(tenant_root(tenant) + AGENT_CARD_PATH)

    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"


@pytest.mark.parametrize("transport", BINDINGS_V0_3)
async def test_a_named_tenant_is_served_0_3_at_its_own_urls_and_only_there(edge: str, transport: str) -> None:
    async with WireV0_3.client(edge) as http:
        owner = WireV0_3(http, transport, TENANT_A)
        task = await owner.send(message_v0_3("quote"))
        assert state_of(task) == "input-required"
        intruders = [WireV0_3(http, transport, TENANT_B), WireV0_3(http, transport)]
        for intruder in intruders:
            for attempt in (intruder.get_task, intruder.cancel):
                with pytest.raises(A2ACallError) as refused:
                    await attempt(task["id"])
                assert refused.value.reason == "TASK_NOT_FOUND", refused.value
            with pytest.raises(A2ACallError) as refused:
                await intruder.send(message_v0_3("S", task_id=task["id"]))
            assert refused.value.reason == "TASK_NOT_FOUND", refused.value
            with pytest.raises(A2ACallError) as refused:
                async with intruder.resubscribe(task["id"]) as events:
                    await anext(events)
            assert refused.value.reason == "TASK_NOT_FOUND", refused.value
        done = await owner.send(message_v0_3("S", task_id=task["id"]))
        fetched = await owner.get_task(task["id"])

    assert state_of(done) == state_of(fetched) == "completed"


async def test_a_task_is_the_tenants_on_both_versions(edge: str) -> None:
    async with httpx.AsyncClient(base_url=edge, headers={"A2A-Version": "1.0"}, timeout=HANG_S) as current:
        task = await start_quote(binding("jsonrpc", current, TENANT_A))
    async with WireV0_3.client(edge) as http:
        fetched = await WireV0_3(http, "jsonrpc", TENANT_A).get_task(task["id"])
        with pytest.raises(A2ACallError) as refused:
            await WireV0_3(http, "jsonrpc", TENANT_B).get_task(task["id"])

    assert (fetched["id"], state_of(fetched)) == (task["id"], "input-required")
    assert fetched["status"]["message"]["parts"] == [{"kind": "text", "text": QUESTION}]
    assert refused.value.reason == "TASK_NOT_FOUND"


async def test_a_0_3_request_at_the_root_naming_a_tenant_stays_the_default_tenants(edge: str) -> None:
    async with WireV0_3.client(edge) as http:
        task = await WireV0_3(http, "jsonrpc", TENANT_A).send(message_v0_3("quote"))
        envelope = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/get",
            "params": {"id": task["id"], "tenant": TENANT_A},
        }
        answer = (await http.post(JSONRPC_PATH, json=envelope)).json()

    assert answer["error"]["code"] == -32001, answer


@pytest.mark.parametrize("transport", BINDINGS_V0_3)
async def test_an_unknown_tenants_urls_refuse_cleanly(edge: str, transport: str) -> None:
    async with WireV0_3.client(edge) as http:
        ghost = WireV0_3(http, transport, "ghost")
        with pytest.raises(A2ACallError) as sent:
            await ghost.send(message_v0_3("quote"))
        with pytest.raises(A2ACallError) as fetched:
            await ghost.get_task("00000000-0000-4000-8000-000000000000")

    assert sent.value.reason == "INVALID_PARAMS"
    assert sent.value.coded == ((200, -32602) if transport == "jsonrpc" else (400, None))
    assert fetched.value.reason == "TASK_NOT_FOUND"
    assert fetched.value.coded == ((200, -32001) if transport == "jsonrpc" else (404, None))


async def test_a_tenants_urls_refuse_a2a_1_0(edge: str) -> None:
    root = tenant_root(TENANT_A)
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "quote"}]}
    async with httpx.AsyncClient(base_url=edge, headers={"A2A-Version": "1.0"}, timeout=HANG_S) as http:
        rpc = await http.post(
            root + JSONRPC_PATH,
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
        )
        rest = await http.post(root + REST_PATH + "/v1/message:send", json={"message": message})
        rest_1_0 = await http.post(root + REST_PATH + "/message:send", json={"message": message})

    error = rpc.json()["error"]
    assert (error["code"], error["data"][0]["reason"]) == (-32009, "VERSION_NOT_SUPPORTED")
    assert "0.3 only" in error["message"]
    assert (rest.status_code, rest.json()["error"]["details"][0]["reason"]) == (400, "VERSION_NOT_SUPPORTED")
    # The 1.0 HTTP+JSON paths do not exist under a tenant's root (1.0 names its tenant after /a2a/rest).
    assert rest_1_0.status_code == 404


async def test_a_tenants_jsonrpc_url_with_a_trailing_slash_is_served(edge: str) -> None:
    envelope = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": message_v0_3("hi")},
    }
    async with WireV0_3.client(edge) as http:
        response = await http.post(tenant_root(TENANT_A) + JSONRPC_PATH + "/", json=envelope)

    assert response.status_code == 200
    assert state_of(response.json()["result"]) == "completed"


async def test_without_a_default_tenant_0_3_is_served_at_each_tenants_root_only(sqlite_url: str) -> None:
    tenants = TenantRegistry(Tenant(id=t, pay_to=PAY_TO[t], price=1) for t in (TENANT_A, TENANT_B))
    with running_merchant(sqlite_url, tenants=tenants) as base_url:
        async with WireV0_3.client(base_url) as http:
            at_root = await http.post(
                JSONRPC_PATH,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "message/send",
                    "params": {"message": message_v0_3("hi")},
                },
            )
            served = await WireV0_3(http, "rest", TENANT_B).send(message_v0_3("hi"))
            root_card = await http.get(AGENT_CARD_PATH, headers={"A2A-Version": "1.0"})
            tenant_card = await http.get(tenant_root(TENANT_B) + AGENT_CARD_PATH)

    assert at_root.json()["error"]["code"] == -32009
    assert state_of(served) == "completed"
    legacy = [i for i in root_card.json()["supportedInterfaces"] if i["protocolVersion"] == "0.3"]
    assert [(i["tenant"], i["url"]) for i in legacy] == [
        (tenant, f"{base_url}{tenant_root(tenant)}{path}")
        for tenant in (TENANT_A, TENANT_B)
        for path in (JSONRPC_PATH, REST_PATH)
    ]
    assert tenant_card.json()["url"] == f"{base_url}{tenant_root(TENANT_B)}{JSONRPC_PATH}"
    assert tenant_card.headers["a2a-version"] == "0.3"
