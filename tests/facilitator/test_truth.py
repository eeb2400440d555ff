"""Every answer that a settlement failed or was not sent is checked against the chain first: a node that
took the settlement yet answered its send with an error gets a success once it is mined (pending while it
waits in the pool), never "nothing was charged" for a payer who is charged."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ClaimState, Facilitator
from a2a_x402.facilitator.wire import Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator import PAY_TO, make_requirements

from .conftest import OpenFacilitator
from .payments import claim_rows


def _sends_answered_with_an_error(node_url: str) -> Starlette:
    """A JSON-RPC front to `node_url` that passes every call on and answers each send with an error, as a
    gateway whose node took the transaction and whose own answer failed."""

    async def forward(request: Request) -> Response:
        body = await request.body()
        calls = orjson.loads(body)
        async with httpx.AsyncClient(timeout=10) as client:
            answer = await client.post(node_url, content=body, headers={"content-type": "application/json"})
        replies = orjson.loads(answer.content)
        sends = {
            c["id"]
            for c in (calls if isinstance(calls, list) else [calls])
            if c.get("method") == "eth_sendRawTransaction"
        }
        for reply in replies if isinstance(replies, list) else [replies]:
            if reply.get("id") in sends:
                reply.pop("result", None)
                reply["error"] = {"code": -32603, "message": "upstream request failed"}
        return Response(orjson.dumps(replies), media_type="application/json")

    return Starlette(routes=[Route("/", forward, methods=["POST"])])


async def test_a_send_answered_with_an_error_that_the_chain_mined_is_a_success(
    sqlite_url: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    asgi_server: Callable[..., str],
) -> None:
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    front = asgi_server(_sends_answered_with_an_error(chain.rpc_url))
    service = await open_facilitator(sqlite_url, rpc_url=front)

    answer = await service.settle(payload, requirements, idempotency_key="erred-1")
    again = await service.settle(payload, requirements, idempotency_key="erred-1")

    assert (answer.success, answer.error_reason) == (True, None), answer
    assert again == answer
    receipt = chain.rpc.call("eth_getTransactionReceipt", [answer.transaction])
    assert receipt["status"] == "0x1"
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert [(r["state"], r["tx_hash"]) for r in await claim_rows(sqlite_url)] == [
        (ClaimState.SUCCEEDED, answer.transaction)
    ]


async def test_a_send_answered_with_an_error_still_in_the_pool_is_pending_until_mined(
    sqlite_url: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    asgi_server: Callable[..., str],
) -> None:
    """On a chain with block times the errored send waits in the pool: the pending block uses the
    authorization, so the answer is pending, never "nothing was charged"; once mined, the claim is
    recorded from the chain."""
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    front = asgi_server(_sends_answered_with_an_error(chain.rpc_url))
    service = await open_facilitator(sqlite_url, rpc_url=front, claim_lease_s=0.2)
    chain.rpc.call("evm_setAutomine", [False])

    answer = await service.settle(payload, requirements, idempotency_key="erred-2")
    chain.rpc.call("evm_mine")
    # Once the claim's lease runs out, a reconcile pass records what the chain did.
    await wait_until(lambda: _reconciled(service), what="a reconcile pass to record the claim")
    again = await service.settle(payload, requirements, idempotency_key="erred-2")

    assert (answer.success, answer.error_reason) == (False, Reason.SETTLEMENT_PENDING), answer
    assert again.success, again
    assert chain.rpc.call("eth_getTransactionReceipt", [again.transaction])["status"] == "0x1"
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


async def _reconciled(service: Facilitator) -> bool:
    return await service.reconcile() == 1
