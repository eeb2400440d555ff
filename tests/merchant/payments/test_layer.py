"""`PaymentExecutor` on a plain a2a-sdk server (the SDK's routes and `DefaultRequestHandler`, no edge) refuses
to charge: the task fails with the one line naming what is missing and pointing at `paid_app`, one log line
says so, and nothing is offered or booked."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import pytest
from a2a.server.request_handlers import DefaultRequestHandler, RequestHandler
from a2a.server.routes import add_a2a_routes_to_fastapi, create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface
from fastapi import FastAPI

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.facilitator import HttpFacilitatorClient, RpcClient
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.payments import (
    Asset,
    OfferStore,
    PaymentExecutor,
    PaymentLayerMissingError,
    PaymentRequestHandler,
    Presentations,
    Pricing,
)
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import DEFAULT_PAY_TO, ledger_entries
from tests.fixtures.servers import base_url_of, bind_loopback, serve_asgi
from tests.merchant.paid_agents import SHOUT, SHOUT_PRICE, Voices, skill_named

pytestmark = pytest.mark.timeout(60)

_LAYER_LOGGER = "a2a_x402.merchant.payments._layer"


@contextmanager
def plain_server(chain: DevChain, database_url: str, *, payment_handler: bool) -> Iterator[str]:
    """The SDK's own JSON-RPC app around `PaymentExecutor(Voices())`, optionally with the payment layer's
    request handler around the SDK's (but never the merchant's edge); yields its base URL."""
    engine = create_engine(database_url)
    sock = bind_loopback()
    base_url = base_url_of(sock)
    outbox = Outbox(engine)
    offers = OfferStore(engine, events=outbox)
    asset = Asset(chain.network, chain.asset, chain.asset_name, chain.asset_version)
    pricing = Pricing(
        TenantRegistry([Tenant(id="", pay_to=DEFAULT_PAY_TO, price=SHOUT_PRICE)]),
        asset,
        resource_url=base_url,
    )
    # A facilitator nobody listens for: the refusal comes before anything would be verified or settled.
    facilitator = HttpFacilitatorClient("http://127.0.0.1:9")
    rpc = RpcClient(chain.rpc_url)
    executor = PaymentExecutor(
        Voices(),
        pricing=pricing,
        facilitator=facilitator,
        offers=offers,
        ledger=Ledger(engine, outbox),
        chain=rpc,
        skill_of=skill_named,
    )
    card = AgentCard(
        name="plain",
        description="A PaymentExecutor on a plain a2a-sdk server.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base_url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[SHOUT],
    )
    handler: RequestHandler = DefaultRequestHandler(executor, InMemoryTaskStore(), card)
    if payment_handler:
        handler = PaymentRequestHandler(
            handler, pricing=pricing, offers=offers, presentations=Presentations(engine), skill_of=skill_named
        )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await rpc.aclose()
            await facilitator.aclose()
            await engine.dispose()

    app = FastAPI(lifespan=lifespan)
    add_a2a_routes_to_fastapi(
        app,
        agent_card_routes=create_agent_card_routes(card),
        jsonrpc_routes=create_jsonrpc_routes(handler, rpc_url="/"),
    )
    with serve_asgi(app, sock=sock) as url:
        yield url


@pytest.mark.error_logs(
    "why: PaymentExecutor served without the payment layer, a wiring bug logged for the operator"
)
@pytest.mark.parametrize(
    ("payment_handler", "missing"),
    [
        (
            False,
            "without the merchant's edge (version negotiation, extension echo, tenant task store) and the "
            "payment layer's request handler (PaymentRequestHandler)",
        ),
        (True, "without the merchant's edge (version negotiation, extension echo, tenant task store), so"),
    ],
)
async def test_a_plain_sdk_server_fails_the_task_and_charges_nothing(
    chain: DevChain, sqlite_url: str, caplog: pytest.LogCaptureFixture, payment_handler: bool, missing: str
) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hello"}]}
        },
    }
    headers = {"A2A-Version": "1.0", "A2A-Extensions": EXTENSION_URI}
    with (
        caplog.at_level(logging.INFO),
        plain_server(chain, sqlite_url, payment_handler=payment_handler) as url,
    ):
        async with httpx.AsyncClient(headers=headers, timeout=HANG_S) as http:
            answer = (await http.post(url + "/", json=request)).json()

    task = answer["result"]["task"]
    said = task["status"]["message"]["parts"][0]["text"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert missing in said and "a2a_x402.merchant.paid_app(...)" in said
    assert "artifacts" not in task  # the executor never ran: nothing uppercased, nothing to pay for
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [(r.name, r.getMessage()) for r in errors] == [
        (_LAYER_LOGGER, f"task {task['id']} refused: {said}")
    ]
    engine = create_engine(sqlite_url)
    try:
        assert await OfferStore(engine).get(task["id"]) is None
    finally:
        await engine.dispose()
    assert await ledger_entries(sqlite_url) == []
    assert chain.balance_of(DEFAULT_PAY_TO) == 0


def test_the_refusal_is_typed_and_names_its_code() -> None:
    refusal = PaymentLayerMissingError("the payment layer's request handler (PaymentRequestHandler)")

    assert refusal.code == "payment_layer_missing"
    assert "\n" not in str(refusal)
    assert str(refusal).startswith("PaymentExecutor runs without the payment layer's request handler")
