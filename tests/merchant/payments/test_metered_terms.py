"""A metered skill's terms: x402 `upto` for its maximum, settled from the facilitator's `/supported` address.

A facilitator that settles no `upto` payments on the network, or cannot be asked, makes a metered request
refused before any task exists (one clear line, nothing stored); a fixed-price skill is unaffected.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI_V02
from a2a_x402.facilitator.wire import PaymentRequired, SupportedKind, SupportedResponse
from a2a_x402.merchant.edge import JSONRPC_PATH
from a2a_x402.merchant.payments._upto import MeteringUnavailableError, UptoFacilitator
from a2a_x402.storage import create_engine
from tests.fixtures.a2a_errors import A2ACallError
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantStarter, MerchantWire, offered_terms, user_message
from tests.fixtures.servers import serve_asgi

from .flows import address_of, offer, texts

MAXIMUM = 500_000


def metered_tenants(tmp_path: Path, maximum: int = MAXIMUM) -> Path:
    """The default tenant metering text-stats up to `maximum`; acme pricing it fixed."""
    path = tmp_path / "tenants.toml"
    path.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\n'
        f'[default.metered_skills]\ntext-stats = "{maximum}"\n\n'
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 7000\n'
    )
    return path


async def test_a_metered_skill_offers_upto_terms_for_its_maximum(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    merchant = start_merchant(sqlite_url, tenants_file=metered_tenants(tmp_path))
    async with merchant.http() as http:
        first = await offer(MerchantWire(http, "jsonrpc"))
        second = await offer(MerchantWire(http, "rest"))
        fixed = await offer(MerchantWire(http, "jsonrpc", "acme"))

    [terms] = offered_terms(first).accepts
    assert (terms.scheme, terms.amount, terms.pay_to) == ("upto", MAXIMUM, DEFAULT_PAY_TO)
    assert terms.extra is not None and set(terms.extra) == {
        "name",
        "version",
        "facilitatorAddress",
        "offerId",
    }
    # The in-process facilitator settles from its relayer key: the address the payer's witness must name.
    assert terms.extra["facilitatorAddress"] == address_of(chain.relayer_key)
    assert "Payment required: up to 0.50 USDC to" in texts(first)[0]
    assert offered_terms(first).resource.description == "text-stats for up to 0.50 USDC"
    [again] = offered_terms(second).accepts
    assert again.extra is not None and again.extra["facilitatorAddress"] == terms.extra["facilitatorAddress"]
    assert again.extra["offerId"] != terms.extra["offerId"]
    [other] = offered_terms(fixed).accepts
    assert (other.scheme, other.amount) == ("exact", 7000)
    assert "Payment required: 0.007 USDC to" in texts(fixed)[0]


async def test_v0_2_clients_get_upto_terms_as_the_x402_v2_document(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    merchant = start_merchant(sqlite_url, tenants_file=metered_tenants(tmp_path))
    part = {"kind": "text", "text": "The quick brown fox."}
    message = {"kind": "message", "messageId": "m-1", "role": "user", "parts": [part]}
    body = {"jsonrpc": "2.0", "method": "message/send", "id": "req-1", "params": {"message": message}}
    headers = {"X-A2A-Extensions": EXTENSION_URI_V02}
    async with httpx.AsyncClient(base_url=merchant.base_url, headers=headers, timeout=HANG_S) as http:
        answer = (await http.post(JSONRPC_PATH, json=body)).json()

    metadata = answer["result"]["status"]["message"]["metadata"]
    assert metadata["x402.payment.status"] == "payment-required"
    terms = metadata["x402.payment.required"]
    assert terms["x402Version"] == 2  # x402 v1 has no upto
    [entry] = PaymentRequired.from_wire(terms).accepts
    assert (entry.scheme, entry.amount) == ("upto", MAXIMUM)


@contextmanager
def facilitator_without_upto(chain: DevChain) -> Iterator[str]:
    """A facilitator on 127.0.0.1 whose `/supported` lists only `exact` for the chain's network."""

    async def supported(request: Request) -> JSONResponse:
        kinds = SupportedResponse(
            kinds=(SupportedKind(x402_version=2, scheme="exact", network=chain.network),)
        )
        return JSONResponse(kinds.to_json_dict())

    with serve_asgi(Starlette(routes=[Route("/supported", supported)])) as url:
        yield url


@pytest.mark.parametrize("reachable", [True, False])
async def test_a_facilitator_without_upto_refuses_metered_requests_clearly(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    reachable: bool,
) -> None:
    with facilitator_without_upto(chain) as url:
        facilitator_url = url if reachable else "http://127.0.0.1:9"  # the discard port: nothing answers
        merchant = start_merchant(
            sqlite_url, tenants_file=metered_tenants(tmp_path), facilitator_url=facilitator_url
        )
        async with merchant.http() as http:
            with caplog.at_level(logging.WARNING), pytest.raises(A2ACallError) as refused:
                await MerchantWire(http, "jsonrpc").send(user_message())
            fixed = await MerchantWire(http, "rest", "acme").send(user_message())

    assert refused.value.reason == "UNSUPPORTED_OPERATION"
    why = (
        "settles no upto payments on " + chain.network
        if reachable
        else "could not be asked whether it settles upto"
    )
    assert (
        refused.value.message
        == f"the skill 'text-stats' is metered, but the facilitator {why}: it cannot be paid for now"
    )
    assert fixed["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    engine = create_engine(sqlite_url)
    try:
        async with engine.connect() as connection:
            offers = (await connection.execute(sa.text("SELECT tenant FROM payment_offers"))).scalars().all()
            callers = (
                (await connection.execute(sa.text("SELECT tenant FROM payment_offer_callers")))
                .scalars()
                .all()
            )
            tasks = (await connection.execute(sa.text("SELECT count(*) FROM tasks"))).scalar_one()
    finally:
        await engine.dispose()
    assert (offers, callers, tasks) == (["acme"], ["acme"], 1)  # nothing of the refused request stays
    assert all("Traceback" not in record.getMessage() for record in caplog.records)


async def test_the_upto_address_is_asked_once_and_a_miss_is_asked_again() -> None:
    answers = [
        SupportedResponse(kinds=(SupportedKind(x402_version=2, scheme="exact", network="eip155:31337"),)),
        SupportedResponse(
            kinds=(
                SupportedKind(
                    x402_version=2,
                    scheme="upto",
                    network="eip155:1",
                    extra={"facilitatorAddress": "0x" + "1" * 40},
                ),
                SupportedKind(
                    x402_version=2,
                    scheme="upto",
                    network="eip155:31337",
                    extra={"facilitatorAddress": "0x" + "ab" * 20},
                ),
            )
        ),
    ]
    asked: list[int] = []

    async def supported() -> SupportedResponse:
        asked.append(1)
        return answers[min(len(asked), len(answers)) - 1]

    upto = UptoFacilitator(supported, "eip155:31337")
    with pytest.raises(MeteringUnavailableError, match="settles no upto payments on eip155:31337"):
        await upto.address()
    assert await upto.address() == "0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB"
    assert await upto.address() == "0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB"
    assert len(asked) == 2
    with pytest.raises(MeteringUnavailableError, match="cannot be asked"):
        await UptoFacilitator(None, "eip155:31337").address()
