"""The Agent Card: built from settings and tenants per protocol version, and served at the well-known path."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import httpx
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import types as compat
from a2a.types import AgentCard, AgentExtension, AgentProvider
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct

from a2a_x402.merchant.callers import API_KEY_SCHEME
from a2a_x402.merchant.edge import (
    AGENT_CARD_PATH,
    AgentCardSettings,
    CardSettingsError,
    ProtocolVersion,
    build_agent_card,
    build_tenant_agent_card,
    render_agent_card,
    render_versionless_agent_card,
    served_versions,
)
from a2a_x402.merchant.edge._card_security import _ANONYMOUS, _SCHEMES
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from tests.fixtures.deadlines import HANG_S

from .conftest import PAY_TO, SKILL, TENANT_A, TENANT_B, make_card, make_tenants, running_merchant
from .wire import JSON

BASE = "https://shop.example"


def interfaces(base_url: str) -> list[JSON]:
    """The interfaces the test tenants' 1.0 card must list, in order: 1.0 per tenant, then 0.3 per tenant
    (the default tenant's at the root, a named tenant's under its own root, carrying its `tenant`)."""
    listed = []
    for tenant in ("", TENANT_A, TENANT_B):
        for path, binding in (("/a2a/jsonrpc", "JSONRPC"), ("/a2a/rest", "HTTP+JSON")):
            interface = {"url": base_url + path, "protocolBinding": binding, "protocolVersion": "1.0"}
            if tenant:
                interface["tenant"] = tenant
            listed.append(interface)
    for tenant in ("", TENANT_A, TENANT_B):
        root = f"/t/{tenant}" if tenant else ""
        for path, binding in (("/a2a/jsonrpc", "JSONRPC"), ("/a2a/rest", "HTTP+JSON")):
            interface = {"url": base_url + root + path, "protocolBinding": binding, "protocolVersion": "0.3"}
            if tenant:
                interface["tenant"] = tenant
            listed.append(interface)
    return listed


# What a served card says of the API keys (the edge fixture's merchant accepts them, and anonymous callers).
API_KEYS_DESCRIPTION = _SCHEMES[API_KEY_SCHEME].description + _ANONYMOUS
API_KEYS = {
    "securitySchemes": {
        "apiKey": {
            "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "bearerFormat": "x402k",
                "description": API_KEYS_DESCRIPTION,
            }
        }
    },
    "securityRequirements": [{"schemes": {"apiKey": {}}}, {}],
}
API_KEYS_V0_3 = {
    "securitySchemes": {
        "apiKey": {
            "type": "http",
            "scheme": "Bearer",
            "bearerFormat": "x402k",
            "description": API_KEYS_DESCRIPTION,
        }
    },
    "security": [{"apiKey": []}, {}],
}


def served_card(base_url: str) -> JSON:
    return {**expected_card(base_url), **API_KEYS}


def served_card_v0_3(base_url: str) -> JSON:
    return {**expected_card_v0_3(base_url), **API_KEYS_V0_3}


def served_versionless_card(base_url: str) -> JSON:
    return {**expected_versionless_card(base_url), **API_KEYS_V0_3}


def expected_card(base_url: str) -> JSON:
    return {
        "name": "Test Merchant",
        "description": "Sells t-shirts",
        "supportedInterfaces": interfaces(base_url),
        "version": "1.2.3",
        "capabilities": {"streaming": True, "pushNotifications": False},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{"id": "order", "name": "Order", "description": "Orders a t-shirt", "tags": ["commerce"]}],
    }


def test_card_lists_every_tenant_on_every_binding_default_first() -> None:
    card = build_agent_card(make_card(BASE + "/"), make_tenants())

    assert MessageToDict(card) == expected_card(BASE)


def expected_card_v0_3(base_url: str) -> JSON:
    """The 0.3-shaped card of the test merchant."""
    return {
        "name": "Test Merchant",
        "description": "Sells t-shirts",
        "version": "1.2.3",
        "url": base_url + "/a2a/jsonrpc",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3",
        "additionalInterfaces": [
            {"url": base_url + "/a2a/jsonrpc", "transport": "JSONRPC"},
            {"url": base_url + "/a2a/rest", "transport": "HTTP+JSON"},
        ],
        "capabilities": {"streaming": True, "pushNotifications": False},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{"id": "order", "name": "Order", "description": "Orders a t-shirt", "tags": ["commerce"]}],
    }


def expected_versionless_card(base_url: str) -> JSON:
    """The card served to requests naming no version: the 0.3 card plus every interface of the 1.0 one."""
    return {**expected_card_v0_3(base_url), "supportedInterfaces": interfaces(base_url)}


def test_card_without_a_default_tenant_has_no_tenantless_interface_and_no_root_0_3() -> None:
    tenants = TenantRegistry([Tenant(id=TENANT_B, pay_to=PAY_TO[TENANT_B], price=1)])

    card = build_agent_card(make_card(BASE), tenants)

    listed = [(i.tenant, i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces]
    assert listed == [
        (TENANT_B, "JSONRPC", "1.0", BASE + "/a2a/jsonrpc"),
        (TENANT_B, "HTTP+JSON", "1.0", BASE + "/a2a/rest"),
        (TENANT_B, "JSONRPC", "0.3", f"{BASE}/t/{TENANT_B}/a2a/jsonrpc"),
        (TENANT_B, "HTTP+JSON", "0.3", f"{BASE}/t/{TENANT_B}/a2a/rest"),
    ]
    assert served_versions(tenants) == (ProtocolVersion.V1_0,)
    with pytest.raises(CardSettingsError, match="needs a default tenant"):
        build_agent_card(make_card(BASE), tenants, ProtocolVersion.V0_3)


def test_0_3_card_has_the_0_3_shape_and_only_0_3_extensions() -> None:
    v1 = AgentExtension(uri="https://example.org/ext/x402/v0.3", required=True)
    v02 = AgentExtension(uri="https://example.org/ext/x402/v0.2", required=True)
    params = Struct()
    params.update({"decimals": 6})
    v02.params.CopyFrom(params)
    settings = AgentCardSettings(
        name="Test Merchant",
        description="Sells t-shirts",
        version="1.2.3",
        base_url=BASE,
        skills=[SKILL],
        extensions=[v1],
        extensions_v0_3=[v02],
    )

    v1_card = build_agent_card(settings, make_tenants())
    v03_card = build_agent_card(settings, make_tenants(), ProtocolVersion.V0_3)
    served = json.loads(render_agent_card(v03_card, ProtocolVersion.V0_3))

    assert [e.uri for e in v1_card.capabilities.extensions] == [v1.uri]
    expected = expected_card_v0_3(BASE)
    expected["capabilities"]["extensions"] = [{"uri": v02.uri, "required": True, "params": {"decimals": 6}}]
    assert served == expected
    # An integral number in params is written as an integer, never as 6.0.
    assert b'"decimals":6}' in render_agent_card(v03_card, ProtocolVersion.V0_3)
    assert json.loads(render_agent_card(v1_card, ProtocolVersion.V1_0))["capabilities"]["extensions"] == [
        {"uri": v1.uri, "required": True}
    ]


@pytest.mark.parametrize("extended", [False, True])
def test_versionless_card_is_the_0_3_card_plus_what_a_1_0_client_reads(extended: bool) -> None:
    v03 = AgentExtension(uri="https://example.org/ext/x402/v0.3", required=True)
    v02 = AgentExtension(uri="https://example.org/ext/x402/v0.2", required=True)
    v01 = AgentExtension(uri="https://example.org/ext/x402/v0.1", required=False)
    params = Struct()
    params.update({"decimals": 6})
    v03.params.CopyFrom(params)
    settings = AgentCardSettings(
        name="Test Merchant",
        description="Sells t-shirts",
        version="1.2.3",
        base_url=BASE,
        skills=[SKILL],
        extensions=[v03, v01],
        extensions_v0_3=[v02, v01],
        tenant_extensions=(lambda _tenant: [v03]) if extended else None,
    )
    current = build_agent_card(settings, make_tenants())
    legacy = build_agent_card(settings, make_tenants(), ProtocolVersion.V0_3)

    body = render_versionless_agent_card(current, legacy)
    served = json.loads(body)

    # Both URIs declared, 0.3's first; a URI both versions declare is listed once.
    declared = [
        {"uri": v02.uri, "required": True},
        {"uri": v01.uri, "required": False},
        {"uri": v03.uri, "required": True, "params": {"decimals": 6}},
    ]
    assert served["capabilities"]["extensions"] == declared
    assert b'"decimals":6}' in body
    assert served["capabilities"].get("extendedAgentCard", False) is extended
    assert served["supportedInterfaces"] == interfaces(BASE)
    # A 0.3 client reads exactly the 0.3 card: the members it knows are the 0.3 card's, and it parses.
    as_0_3 = json.loads(render_agent_card(legacy, ProtocolVersion.V0_3))
    assert {key: served[key] for key in as_0_3 if key != "capabilities"} == {
        key: value for key, value in as_0_3.items() if key != "capabilities"
    }
    assert served["capabilities"]["extensions"][:2] == as_0_3["capabilities"]["extensions"]
    assert set(served) - set(as_0_3) == {"supportedInterfaces"}
    assert compat.AgentCard.model_validate(served).url == BASE + "/a2a/jsonrpc"
    # A 1.0 client (a2a-sdk's card parser) sees every interface of the 1.0 card and its extensions.
    parsed = parse_agent_card(json.loads(body))
    assert list(parsed.supported_interfaces) == list(current.supported_interfaces)
    assert {e.uri for e in parsed.capabilities.extensions} == {v01.uri, v02.uri, v03.uri}
    assert parsed.capabilities.extended_agent_card is extended


def test_card_carries_extensions_and_optional_fields() -> None:
    params = Struct()
    params.update({"networks": ["eip155:84532"], "payTo": {TENANT_A: PAY_TO[TENANT_A]}})
    extension = AgentExtension(uri="https://example.org/ext/x402/v0.3", required=True, params=params)
    settings = AgentCardSettings(
        name="M",
        description="d",
        version="1",
        base_url=BASE,
        skills=[SKILL],
        extensions=[extension],
        provider=AgentProvider(organization="Acme", url="https://acme.example"),
        documentation_url="https://shop.example/docs",
        icon_url="https://shop.example/icon.png",
        default_output_modes=["application/json"],
    )

    card = MessageToDict(build_agent_card(settings, make_tenants()))

    assert card["capabilities"]["extensions"] == [
        {
            "uri": "https://example.org/ext/x402/v0.3",
            "required": True,
            "params": {"networks": ["eip155:84532"], "payTo": {TENANT_A: PAY_TO[TENANT_A]}},
        }
    ]
    assert card["provider"] == {"organization": "Acme", "url": "https://acme.example"}
    assert (card["documentationUrl"], card["iconUrl"]) == (
        "https://shop.example/docs",
        "https://shop.example/icon.png",
    )
    assert card["defaultOutputModes"] == ["application/json"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", " ", "name must not be empty"),
        ("description", "", "description must not be empty"),
        ("version", "", "version must not be empty"),
        ("skills", [], "skills must not be empty"),
        ("base_url", "shop.example", "must be an absolute http"),
        ("base_url", "ftp://shop.example", "must be an absolute http"),
        ("base_url", "https://shop.example/?x=1", "must be an absolute http"),
    ],
)
def test_card_settings_are_validated(field: str, value: object, message: str) -> None:
    values: JSON = {"name": "M", "description": "d", "version": "1", "base_url": BASE, "skills": [SKILL]}

    with pytest.raises(CardSettingsError, match=message) as failure:
        AgentCardSettings(**{**values, field: value})

    assert failure.value.code == "card_settings_invalid"


@pytest.mark.parametrize(
    ("headers", "version"),
    [
        ({"A2A-Version": "1.0"}, "1.0"),
        ({}, None),
        ({"A2A-Version": "0.3"}, "0.3"),
        ({"A2A-Version": ""}, None),
    ],
)
async def test_served_card_is_the_requested_version_cached_and_revalidated(
    sqlite_url: str, headers: dict[str, str], version: str | None
) -> None:
    with running_merchant(sqlite_url) as base_url:
        async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as http:
            response = await http.get(AGENT_CARD_PATH, headers=headers)
            etag = response.headers["etag"]
            revalidated = await http.get(AGENT_CARD_PATH, headers={**headers, "If-None-Match": etag})
            listed = await http.get(AGENT_CARD_PATH, headers={**headers, "If-None-Match": f'"x", {etag}'})

    expected = {"1.0": served_card, "0.3": served_card_v0_3, None: served_versionless_card}[version]
    assert response.status_code == 200
    assert response.json() == expected(base_url)
    assert response.headers["content-type"] == "application/json"
    # A request naming no version is served 0.3, with the card for clients of both versions.
    assert response.headers["a2a-version"] == (version or "0.3")
    assert response.headers["vary"] == "A2A-Version"
    assert response.headers["cache-control"] == "public, max-age=300"
    # A strong tag: the SHA-256 of exactly the bytes served.
    assert etag == f'"{hashlib.sha256(response.content).hexdigest()}"'
    for answer in (revalidated, listed):
        assert answer.status_code == 304
        assert answer.content == b""
        assert (answer.headers["etag"], answer.headers["vary"]) == (etag, "A2A-Version")
        assert answer.headers["cache-control"] == "public, max-age=300"


async def test_each_version_has_its_own_entity_tag(sqlite_url: str) -> None:
    with running_merchant(sqlite_url) as base_url:
        async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as http:
            versionless = await http.get(AGENT_CARD_PATH)
            legacy = await http.get(AGENT_CARD_PATH, headers={"A2A-Version": "0.3"})
            current = await http.get(AGENT_CARD_PATH, headers={"A2A-Version": "1.0"})
            crossed = [
                await http.get(AGENT_CARD_PATH, headers={**named, "If-None-Match": other.headers["etag"]})
                for named, other in (
                    ({"A2A-Version": "1.0"}, versionless),
                    ({"A2A-Version": "1.0"}, legacy),
                    ({"A2A-Version": "0.3"}, versionless),
                    ({}, legacy),
                )
            ]
            by_query = await http.get(AGENT_CARD_PATH, params={"A2A-Version": "1.0"})
            legacy_by_query = await http.get(AGENT_CARD_PATH, params={"A2A-Version": "0.3"})

    assert len({answer.headers["etag"] for answer in (versionless, legacy, current)}) == 3
    assert [answer.status_code for answer in crossed] == [200] * 4
    assert [answer.content for answer in crossed] == [
        current.content,
        current.content,
        legacy.content,
        versionless.content,
    ]
    assert by_query.content == current.content
    assert legacy_by_query.content == legacy.content


@pytest.mark.parametrize("version", ["1.7", "2.0", "0.2", "abc"])
async def test_card_of_an_unsupported_version_is_refused(sqlite_url: str, version: str) -> None:
    with running_merchant(sqlite_url) as base_url:
        async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as http:
            response = await http.get(AGENT_CARD_PATH, headers={"A2A-Version": version})

    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
    assert error["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert "a2a-version" not in response.headers


async def test_card_modifier_shapes_every_served_card(sqlite_url: str) -> None:
    async def rename(card: AgentCard) -> AgentCard:
        served = AgentCard()
        served.CopyFrom(card)
        served.name = "Signed Merchant"
        return served

    with running_merchant(sqlite_url, card_modifier=rename) as base_url:
        async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as http:
            served = (await http.get(AGENT_CARD_PATH, headers={"A2A-Version": "1.0"})).json()
            legacy = (await http.get(AGENT_CARD_PATH)).json()

    assert served == {**served_card(base_url), "name": "Signed Merchant"}
    assert ParseDict(served, AgentCard()).name == "Signed Merchant"
    assert legacy == {**served_versionless_card(base_url), "name": "Signed Merchant"}


def test_a_card_declares_the_callers_schemes_and_the_empty_requirement_only_with_anonymous_callers() -> None:
    tenants = TenantRegistry(
        Tenant(id=tenant_id, pay_to=pay_to, price=1, anonymous_callers=tenant_id == TENANT_A)
        for tenant_id, pay_to in PAY_TO.items()
    )
    settings = dataclasses.replace(make_card(BASE), caller_schemes=("apiKey", "bearerJwt"))

    closed = MessageToDict(build_tenant_agent_card(settings, tenants, TENANT_B, ProtocolVersion.V1_0))
    opened = MessageToDict(build_tenant_agent_card(settings, tenants, TENANT_A, ProtocolVersion.V1_0))
    root_v0_3 = build_agent_card(settings, tenants, ProtocolVersion.V0_3)
    closed_v0_3 = json.loads(render_agent_card(root_v0_3, ProtocolVersion.V0_3))

    assert closed["securityRequirements"] == [{"schemes": {"apiKey": {}}}, {"schemes": {"bearerJwt": {}}}]
    assert opened["securityRequirements"] == [*closed["securityRequirements"], {}]
    assert {s["httpAuthSecurityScheme"]["bearerFormat"] for s in closed["securitySchemes"].values()} == {
        "x402k",
        "JWT",
    }
    assert closed_v0_3["security"] == [{"apiKey": []}, {"bearerJwt": []}]
    assert "securityRequirements" not in MessageToDict(build_agent_card(make_card(BASE), tenants))
