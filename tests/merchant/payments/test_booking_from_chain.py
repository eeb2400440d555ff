"""A facilitator's word is not a booking: what the paid turn books is what the chain shows.

A facilitator (a hosted one, a broken or dishonest one) answers a settlement with success and the hash of
someone else's real payment to the same payee. The merchant reads that receipt through its own node, finds
no transfer from this payer with this nonce, and books nothing: one WARNING line says what the chain shows,
and the reconciler reports it as a difference for the tenant instead of booking it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import HttpFacilitatorClient
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.payments import OfferStore
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.merchant.wiring import build_reconciler
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.payments import submit_directly
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    MerchantStarter,
    MerchantWire,
    ledger_entries,
    payment_message,
)

from .flows import extension, offer
from .test_executor import terms_of


def _lying_facilitator(network: str, tx_hash: str) -> Starlette:
    """Verifies everything and answers every settlement with success and `tx_hash`."""

    async def supported(_: Request) -> JSONResponse:
        kinds = [{"x402Version": 2, "scheme": "exact", "network": network}]
        return JSONResponse({"kinds": kinds, "extensions": [], "signers": {}})

    async def verify(request: Request) -> JSONResponse:
        payer = (await request.json())["paymentPayload"]["payload"]["authorization"]["from"]
        return JSONResponse({"isValid": True, "payer": payer})

    async def settle(request: Request) -> JSONResponse:
        payer = (await request.json())["paymentPayload"]["payload"]["authorization"]["from"]
        return JSONResponse({"success": True, "transaction": tx_hash, "network": network, "payer": payer})

    return Starlette(
        routes=[
            Route("/supported", supported),
            Route("/verify", verify, methods=["POST"]),
            Route("/settle", settle, methods=["POST"]),
        ]
    )


async def test_a_settlement_the_chain_does_not_show_is_not_booked_and_is_reported(
    chain: DevChain,
    start_merchant: MerchantStarter,
    sqlite_url: str,
    asgi_server: Callable[..., str],
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Someone else's real payment to the same payee, of the same price: the transaction the liar names.
    stranger = sign_payment(
        new_payer(), make_requirements(chain, pay_to=DEFAULT_PAY_TO, amount=DEFAULT_PRICE)
    )
    submit_directly(chain, stranger)
    their_tx = str(chain.rpc.call("eth_getBlockByNumber", ["latest", False])["transactions"][-1])
    liar = asgi_server(_lying_facilitator(chain.network, their_tx))
    merchant = start_merchant(sqlite_url, facilitator_url=liar, reconcile_interval_s=3600)
    key = new_payer()

    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire)
        with caplog.at_level(logging.WARNING):
            answered = (await wire.send(payment_message(task["id"], sign_payment(key, terms_of(task)))))[
                "task"
            ]

    assert extension(answered)["status"] == "payment-completed"  # the facilitator said so: delivered
    assert await ledger_entries(sqlite_url) == []
    [line] = [r.getMessage() for r in caplog.records if "not booked" in r.getMessage()]
    assert f"settlement of task {answered['id']} not booked" in line
    assert "shows no transfer" in line and their_tx.lower() in line.lower()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

    engine = create_engine(sqlite_url)
    facilitator = HttpFacilitatorClient(liar)
    outbox = Outbox(engine)
    reconciler = build_reconciler(
        merchant.settings,
        engine=engine,
        facilitator=facilitator,
        offers=OfferStore(engine, events=outbox),
        ledger=Ledger(engine, outbox),
    )
    try:
        report = await reconciler.run_once()
    finally:
        await reconciler.aclose()
        await facilitator.aclose()
        await engine.dispose()

    ours = [d for d in report.differences if answered["id"] in d.text]
    assert [(d.tenant, d.pay_to) for d in ours] == [("", DEFAULT_PAY_TO)]
    assert "shows no transfer" in ours[0].text and "not booked" in ours[0].text
    assert await ledger_entries(sqlite_url) == []
