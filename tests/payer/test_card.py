"""Resolving the reference merchant's Agent Card: its x402 terms, bad cards, interfaces and verification."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from a2a_x402.agentcard import MAX_CARD_BYTES, CardStatus, CardVerifier, DuplicateKeyError, SignaturePolicy
from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.payer import (
    Binding,
    CardAsset,
    CardError,
    CardNotServedError,
    CardPayee,
    MerchantUnreachableError,
    Payer,
    UntrustedCardError,
    resolve_card,
)
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import free_port

from .conftest import PAY_TO, PRICE, TENANT, TENANT_PAY_TO


def x402_params(card: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = next(e for e in card["capabilities"]["extensions"] if e["uri"] == EXTENSION_URI)[
        "params"
    ]
    return params


async def test_resolve_card_reads_the_x402_terms_the_card_pins(
    merchant: Callable[..., str], chain: DevChain
) -> None:
    tenants = TenantRegistry(
        [Tenant(id="", pay_to=PAY_TO, price=PRICE), Tenant(id=TENANT, pay_to=TENANT_PAY_TO, price=1)]
    )
    url = merchant(tenants=tenants)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        by_origin = await resolve_card(http, url)
        by_url = await resolve_card(http, url + "/.well-known/agent-card.json")

    assert by_origin.url == by_url.url == url + "/.well-known/agent-card.json"
    assert by_origin.terms == by_url.terms
    terms = by_origin.terms
    assert terms.networks == {chain.network}
    assert terms.assets == (CardAsset(chain.network, chain.asset, chain.asset_name, chain.asset_version, 6),)
    assert set(terms.pay_to) == {
        CardPayee(chain.network, "", PAY_TO),
        CardPayee(chain.network, TENANT, TENANT_PAY_TO),
    }
    assert terms.payees(chain.network, TENANT) == {TENANT_PAY_TO}
    assert by_origin.verification.status is CardStatus.UNSIGNED  # checked under the default warn policy
    assert by_origin.interface(Binding.HTTP_JSON, TENANT).url == url + "/a2a/rest"


def drop_extension(card: dict[str, Any]) -> None:
    card["capabilities"]["extensions"] = []


def mistype_pay_to(card: dict[str, Any]) -> None:
    entry = x402_params(card)["payTo"][0]
    entry["address"] = entry["address"][:-1] + ("a" if entry["address"][-1] == "A" else "A")


def drop_decimals_type(card: dict[str, Any]) -> None:
    x402_params(card)["assets"][0]["decimals"] = "six"


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        pytest.param(drop_extension, "does not declare the x402 payment extension", id="no-extension"),
        pytest.param(mistype_pay_to, "not a valid \\(checksummed\\) address", id="bad-checksum"),
        pytest.param(drop_decimals_type, "decimals must be an integer", id="bad-decimals"),
    ],
)
async def test_resolve_card_refuses_cards_without_usable_x402_terms(
    edit: Callable[[dict[str, Any]], None], reason: str, merchant: Callable[..., str]
) -> None:
    url = merchant(card_edit=edit)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        with pytest.raises(CardError, match=reason) as caught:
            await resolve_card(http, url)

    assert caught.value.code == "card_invalid"


async def test_resolve_card_refuses_what_is_not_a_card(merchant: Callable[..., str]) -> None:
    url = merchant()

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        with pytest.raises(CardNotServedError) as not_served:
            await resolve_card(http, url + "/no-card-here.json")
        with pytest.raises(CardError, match="absolute http"):
            await resolve_card(http, "ftp://127.0.0.1/card.json")

    # The code says what happened (no card there, not a bad card) and the message what to do.
    assert not_served.value.code == "card_not_served"
    assert str(not_served.value) == (
        f"the card's URL {url}/no-card-here.json answered HTTP 404, not a card: "
        "check the URL (a merchant serves its card at /.well-known/agent-card.json)"
    )


def card_server(chunks: Callable[[], AsyncIterator[bytes]]) -> Starlette:
    """Serves the body ``chunks`` yields at the well-known card path, streamed (no Content-Length)."""

    async def card(_request: Request) -> StreamingResponse:
        return StreamingResponse(chunks(), media_type="application/json")

    return Starlette(routes=[Route(AGENT_CARD_WELL_KNOWN_PATH, card)])


async def test_resolve_card_stops_downloading_a_ten_megabyte_card_at_the_cap(
    asgi_server: Callable[..., str],
) -> None:
    card = json.dumps({"name": "Huge", "description": "x" * (10 * 1024 * 1024)}).encode()
    chunk_bytes = 64 * 1024
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        # Four times the cap at full speed, then the rest never comes: a client that does not stop at the
        # cap waits here until its read timeout instead of refusing the card.
        nonlocal sent
        for start in range(0, len(card), chunk_bytes):
            if sent >= 4 * MAX_CARD_BYTES:
                await asyncio.Event().wait()
            sent += chunk_bytes
            yield card[start : start + chunk_bytes]

    url = asgi_server(card_server(chunks))

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        with pytest.raises(CardError, match=f"larger than {MAX_CARD_BYTES} bytes") as caught:
            await resolve_card(http, url, timeout_s=3.0)

    assert caught.value.code == "card_invalid"
    assert sent < len(card)


async def test_resolve_card_refuses_a_card_with_a_duplicate_member(asgi_server: Callable[..., str]) -> None:
    # Parsers disagree on which member wins; the card is refused before anything reads it.
    body = b'{"name": "Shop", "capabilities": {"extensions": []}, "name": "Evil"}'

    async def chunks() -> AsyncIterator[bytes]:
        yield body

    url = asgi_server(card_server(chunks))

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        with pytest.raises(CardError, match="'name'") as caught:
            await resolve_card(http, url)

    assert caught.value.code == "card_invalid"
    assert isinstance(caught.value.__cause__, DuplicateKeyError)


async def test_connect_refuses_a_tenant_or_binding_the_card_does_not_list(
    merchant: Callable[..., str],
) -> None:
    url = merchant()
    key = "0x" + "11" * 32

    with pytest.raises(CardError, match="no A2A 1.x HTTP\\+JSON interface for tenant 'nobody'"):
        await Payer.connect(url, key, binding=Binding.HTTP_JSON, tenant="nobody")


async def test_connect_refuses_an_unsigned_card_when_signatures_are_required(
    merchant: Callable[..., str],
) -> None:
    url = merchant()
    key = "0x" + "11" * 32

    with pytest.raises(UntrustedCardError) as caught:
        await Payer.connect(url, key, card_verifier=CardVerifier(policy=SignaturePolicy.REQUIRE))
    async with await Payer.connect(
        url, key, card_verifier=CardVerifier(policy=SignaturePolicy.WARN)
    ) as payer:
        verification = payer.card.verification

    assert caught.value.code == "card_untrusted"
    assert verification.status is CardStatus.UNSIGNED


async def test_connect_checks_the_card_under_warn_by_default(
    merchant: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    url = merchant()
    key = "0x" + "11" * 32

    with caplog.at_level(logging.WARNING, logger="a2a_x402.agentcard._verify"):
        async with await Payer.connect(url, key) as payer:
            verification = payer.card.verification
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        off = await resolve_card(http, url, verifier=CardVerifier(policy=SignaturePolicy.OFF))

    assert (verification.status, verification.code) == (CardStatus.UNSIGNED, "card_unsigned")
    [record] = [r for r in caplog.records if r.name == "a2a_x402.agentcard._verify"]
    assert record.levelno == logging.WARNING and "code=card_unsigned" in record.getMessage()
    assert url in record.getMessage()
    assert off.verification.status is CardStatus.SKIPPED


async def test_connect_refuses_a_key_that_is_not_a_key(merchant: Callable[..., str]) -> None:
    with pytest.raises(ValueError, match="not a valid secp256k1 private key") as caught:
        await Payer.connect(merchant(), "0x1234")

    assert "0x1234" not in str(caught.value)


async def test_resolve_card_at_a_closed_port_is_an_unreachable_merchant_without_a_repr() -> None:
    url = f"http://127.0.0.1:{free_port()}/card.json"

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        with pytest.raises(MerchantUnreachableError) as caught:
            await resolve_card(http, url)

    assert (caught.value.code, caught.value.signed) == ("merchant_unreachable", False)
    assert str(caught.value) == (
        f"the merchant could not be reached at {url} (connection refused): check the URL and that it runs"
    )
