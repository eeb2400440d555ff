"""Chain time against the wall clock, over HTTP: a head block minutes behind the clock (an idle chain that
mines only when a transaction arrives) verifies and settles a fresh payment, and a head ahead of the clock
refuses, at verify and at settle and before anything is claimed or sent, only what would expire before a
new block could include it; `validAfter` is judged by the wall clock either way."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
from eth_account import Account
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements, Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.chain import clock_ahead, head_timestamp, idle_for
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO, make_requirements

from .conftest import OpenFacilitator, StartService
from .payments import claim_rows, relayer_nonce, sign_counterfactual


def _body(payload: PaymentPayload, requirements: PaymentRequirements) -> dict[str, Any]:
    return {
        "x402Version": 2,
        "paymentPayload": payload.to_json_dict(),
        "paymentRequirements": requirements.to_json_dict(),
    }


async def _verify_and_settle(base_url: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
        verified = await client.post("/verify", json=body)
        settled = await client.post("/settle", json=body)
    assert (verified.status_code, settled.status_code) == (200, 200)
    return verified.json(), settled.json()


async def test_a_chain_idle_for_twenty_minutes_verifies_and_settles_a_fresh_payment(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    base_url = start_service(database_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)  # valid from ten minutes ago
    head = idle_for(chain.rpc, 1200)
    assert head < payload.payload.authorization.valid_after  # the head alone would say "not yet valid"
    payee_before = chain.balance_of(PAY_TO)

    verified, settled = await _verify_and_settle(base_url, _body(payload, requirements))

    assert verified == {"isValid": True, "payer": payload.payload.authorization.from_address}
    assert settled["success"] is True, settled
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


async def test_a_head_ahead_of_the_clock_refuses_what_expires_before_the_next_block(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    base_url = start_service(database_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)  # valid for 120 s by the wall clock
    clock_ahead(chain.rpc, 3600)
    nonce_before = relayer_nonce(chain)

    verified, settled = await _verify_and_settle(base_url, _body(payload, requirements))

    reason = Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE.value
    assert (verified["isValid"], verified["invalidReason"]) == (False, reason)
    assert "ahead of this facilitator's clock" in verified["invalidMessage"]
    assert (settled["success"], settled["errorReason"], settled["transaction"]) == (False, reason, "")
    assert relayer_nonce(chain) == nonce_before
    assert await claim_rows(database_url) == []


async def test_a_head_ahead_of_the_clock_settles_what_outlives_it(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    base_url = start_service(database_url)
    requirements = make_requirements(chain)
    short_skew = sign_payment(new_payer(), requirements)  # 120 s: outlives a head 30 s ahead
    long_lived = sign_payment(new_payer(), requirements, valid_before=int(time.time()) + 7200)
    payee_before = chain.balance_of(PAY_TO)

    clock_ahead(chain.rpc, 30)
    first = await _verify_and_settle(base_url, _body(short_skew, requirements))
    clock_ahead(chain.rpc, 3600)
    second = await _verify_and_settle(base_url, _body(long_lived, requirements))

    for verified, settled in (first, second):
        assert verified["isValid"] is True, verified
        assert settled["success"] is True, settled
    assert head_timestamp(chain.rpc) > time.time() + 3000
    assert chain.balance_of(PAY_TO) == payee_before + 2 * requirements.amount


async def test_valid_after_is_judged_by_the_wall_clock_even_when_the_head_has_passed_it(
    sqlite_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    now = int(time.time())
    payload = sign_payment(new_payer(), requirements, valid_after=now + 600, valid_before=now + 7200)
    clock_ahead(chain.rpc, 3600)  # the token itself would take it in the next block

    verified, settled = await _verify_and_settle(base_url, _body(payload, requirements))

    reason = Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER.value
    assert (verified["isValid"], verified["invalidReason"]) == (False, reason)
    assert (settled["success"], settled["errorReason"]) == (False, reason)
    assert await claim_rows(sqlite_url) == []


async def test_a_node_simulating_behind_the_clock_accepts_a_payment_valid_when_mined(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    # As ganache, whose `pending` block is its last one: the node's clock runs an hour behind, so the
    # block a transfer is simulated in is older than a validAfter the wall clock has long passed.
    service = await open_facilitator(sqlite_url)
    requirements = make_requirements(chain)
    now = int(time.time())
    payload = sign_payment(new_payer(), requirements, valid_after=now - 30)
    chain.rpc.call("anvil_setTime", [now - 3600])
    pending = int(chain.rpc.call("eth_getBlockByNumber", ["pending", False])["timestamp"], 16)
    assert pending < payload.payload.authorization.valid_after  # the node alone would say "not yet valid"

    verified = await service.verify(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (True, None)
    # Mined at the wall clock's time, as ganache mines: the payment settles.
    chain.rpc.call("anvil_setTime", [int(time.time())])
    payee_before = chain.balance_of(PAY_TO)
    settled = await service.settle(payload, requirements)
    assert settled.success, settled
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


async def test_behind_the_clock_a_payment_failing_for_another_reason_is_refused_for_it(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    requirements = make_requirements(chain)
    now = int(time.time())
    # A payer holding nothing, on a node whose clock lags: refused for its balance, not its window.
    payload = sign_payment(Account.create().key.to_0x_hex(), requirements, valid_after=now - 30)
    chain.rpc.call("anvil_setTime", [now - 3600])

    verified = await service.verify(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (
        False,
        Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE,
    )


async def test_a_payment_not_yet_valid_by_the_wall_clock_either_is_refused_as_not_yet_valid(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements, valid_after=int(time.time()) + 600)

    verified = await service.verify(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (
        False,
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER,
    )
    assert verified.invalid_message is not None and "not valid yet" in verified.invalid_message


def _ignoring_block_overrides(node_url: str) -> Starlette:
    """A JSON-RPC front to `node_url` that drops what follows the block of `eth_call` and `eth_estimateGas`,
    as a node without block overrides (ganache) ignores them."""

    async def forward(request: Request) -> Response:
        calls = orjson.loads(await request.body())
        for call in calls if isinstance(calls, list) else [calls]:
            if call.get("method") in ("eth_call", "eth_estimateGas"):
                call["params"] = call["params"][:2]
        async with httpx.AsyncClient(timeout=HANG_S) as client:
            answer = await client.post(
                node_url, content=orjson.dumps(calls), headers={"content-type": "application/json"}
            )
        return Response(answer.content, media_type="application/json")

    return Starlette(routes=[Route("/", forward, methods=["POST"])])


async def test_a_node_that_cannot_simulate_at_the_clock_refuses_truthfully_as_not_yet_valid(
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    sqlite_url: str,
    asgi_server: Callable[..., str],
) -> None:
    service = await open_facilitator(
        sqlite_url, rpc_url=asgi_server(_ignoring_block_overrides(chain.rpc_url))
    )
    requirements = make_requirements(chain)
    now = int(time.time())
    payload = sign_payment(new_payer(), requirements, valid_after=now - 30)
    chain.rpc.call("anvil_setTime", [now - 3600])
    nonce_before = relayer_nonce(chain)

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements)

    reason = Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER
    assert (verified.is_valid, verified.invalid_reason) == (False, reason)
    assert verified.invalid_message is not None
    assert "not yet valid on this node's clock" in verified.invalid_message
    # anvil's pending block is its next one, stamped by its clock: the refusal says how far behind it is.
    assert "s behind this facilitator's clock; try again in" in verified.invalid_message
    assert "expire" not in verified.invalid_message
    assert (settled.success, settled.error_reason, settled.transaction) == (False, reason, "")
    assert relayer_nonce(chain) == nonce_before


async def test_behind_the_clock_a_counterfactual_wallet_valid_when_mined_verifies_and_settles(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, erc6492_factories=chain.wallet_factory)
    requirements = make_requirements(chain)
    now = int(time.time())
    payload, wallet = sign_counterfactual(chain, requirements, valid_after=now - 30)
    chain.rpc.call("anvil_setTime", [now - 3600])

    verified = await service.verify(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason, verified.payer) == (True, None, wallet)
    chain.rpc.call("anvil_setTime", [int(time.time())])
    payee_before = chain.balance_of(PAY_TO)
    settled = await service.settle(payload, requirements)
    assert settled.success, settled
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


async def test_behind_the_clock_a_counterfactual_wallet_failing_for_another_reason_is_refused_for_it(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, erc6492_factories=chain.wallet_factory)
    requirements = make_requirements(chain)
    now = int(time.time())
    # A wallet holding less than the price, on a node whose clock lags: refused for its balance.
    payload, _wallet = sign_counterfactual(chain, requirements, fund=1, valid_after=now - 30)
    chain.rpc.call("anvil_setTime", [now - 3600])

    verified = await service.verify(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (
        False,
        Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE,
    )


async def test_a_node_that_cannot_simulate_at_the_clock_refuses_a_counterfactual_wallet_as_not_yet_valid(
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    sqlite_url: str,
    asgi_server: Callable[..., str],
) -> None:
    service = await open_facilitator(
        sqlite_url,
        rpc_url=asgi_server(_ignoring_block_overrides(chain.rpc_url)),
        erc6492_factories=chain.wallet_factory,
    )
    requirements = make_requirements(chain)
    now = int(time.time())
    payload, wallet = sign_counterfactual(chain, requirements, valid_after=now - 30)
    chain.rpc.call("anvil_setTime", [now - 3600])
    nonce_before = relayer_nonce(chain)

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements)

    reason = Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER
    assert (verified.is_valid, verified.invalid_reason) == (False, reason)
    assert "not yet valid on this node's clock" in (verified.invalid_message or "")
    assert "expire" not in (verified.invalid_message or "")
    assert (settled.success, settled.error_reason, settled.transaction) == (False, reason, "")
    assert relayer_nonce(chain) == nonce_before
    assert chain.rpc.call("eth_getCode", [wallet, "latest"]) == "0x"
    assert await claim_rows(sqlite_url) == []
