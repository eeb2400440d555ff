"""The Agent Card: built from settings and tenants, and served at the well-known path."""

from __future__ import annotations

import httpx
import pytest
from a2a.types import AgentCard, AgentExtension, AgentProvider
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct

from merchant.edge import AGENT_CARD_PATH, AgentCardSettings, CardSettingsError, build_agent_card
from merchant.tenants import Tenant, TenantRegistry

from .conftest import PAY_TO, SKILL, TENANT_A, TENANT_B, make_card, make_tenants, running_merchant
from .wire import JSON

BASE = "https://shop.example"


def interfaces(base_url: str) -> list[JSON]:
    """The interfaces the test tenants' card must list, in order."""
    listed = []
    for tenant in ("", TENANT_A, TENANT_B):
        for path, binding in (("/a2a/jsonrpc", "JSONRPC"), ("/a2a/rest", "HTTP+JSON")):
            interface = {"url": base_url + path, "protocolBinding": binding, "protocolVersion": "1.0"}
            if tenant:
                interface["tenant"] = tenant
            listed.append(interface)
    return listed


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


def test_card_without_a_default_tenant_has_no_tenantless_interface() -> None:
    tenants = TenantRegistry([Tenant(id=TENANT_B, pay_to=PAY_TO[TENANT_B], price=1)])

    card = build_agent_card(make_card(BASE), tenants)

    assert [(i.tenant, i.protocol_binding) for i in card.supported_interfaces] == [
        (TENANT_B, "JSONRPC"),
        (TENANT_B, "HTTP+JSON"),
    ]


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


async def test_served_card_is_exact_cached_and_revalidated(sqlite_url: str) -> None:
    with running_merchant(sqlite_url) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            response = await http.get(AGENT_CARD_PATH)
            revalidated = await http.get(AGENT_CARD_PATH, headers={"If-None-Match": response.headers["etag"]})

    assert response.status_code == 200
    assert response.json() == expected_card(base_url)
    assert response.headers["cache-control"] == "public, max-age=300"
    assert revalidated.status_code == 304


async def test_card_modifier_shapes_every_served_card(sqlite_url: str) -> None:
    async def rename(card: AgentCard) -> AgentCard:
        served = AgentCard()
        served.CopyFrom(card)
        served.name = "Signed Merchant"
        return served

    with running_merchant(sqlite_url, card_modifier=rename) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            served = (await http.get(AGENT_CARD_PATH)).json()

    assert served == {**expected_card(base_url), "name": "Signed Merchant"}
    assert ParseDict(served, AgentCard()).name == "Signed Merchant"
