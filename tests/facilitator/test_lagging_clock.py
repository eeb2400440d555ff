"""Nodes that simulate behind the wall clock. ganache 7 (its `pending` block is its head, and it takes no
block overrides), idle since before a payment became valid: the wall clock decides the window once
validAfter is the validity margin behind it, reads decide the rest, and the node is asked for an override
once. Hardhat 3 with its clock behind ours (its pending block is its next one, and it takes no override
either): a payment valid by the wall clock is refused as not yet valid on the node's clock, with how long
to wait, and settles once that clock has passed validAfter.

anvil with its clock set back, behind a front that drops overrides, is tests/facilitator/test_chain_time.py's;
the settle suite on every node is tests/facilitator/test_any_node.py.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest
from eth_account import Account
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator
from a2a_x402.facilitator.wire import Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.chain import head_timestamp
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator import PAY_TO, facilitator_settings_on, make_requirements
from tests.fixtures.peer_nodes import HARDHAT_LAG_S

from .payments import relayer_nonce

_NOT_YET_VALID = Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER

Open = Callable[..., Awaitable[Facilitator]]


@pytest.fixture
async def open_on_ganache(ganache_chain: DevChain, sqlite_url: str) -> AsyncIterator[Open]:
    """`await open_on_ganache(**changes)`: an in-process facilitator on ganache, closed after the test."""
    opened: list[Facilitator] = []

    async def start(**changes: Any) -> Facilitator:
        service = await Facilitator.open(facilitator_settings_on(ganache_chain, sqlite_url, **changes))
        opened.append(service)
        return service

    try:
        yield start
    finally:
        for service in opened:
            await service.aclose()


async def _idle_past(chain: DevChain) -> int:
    """A validAfter one second after the head, once the wall clock is past it."""
    valid_after = head_timestamp(chain.rpc) + 1
    await wait_until(lambda: time.time() >= valid_after + 1, what="the wall clock past validAfter")
    return valid_after


async def test_within_the_margin_a_payment_is_refused_as_not_yet_valid_and_nothing_is_sent(
    ganache_chain: DevChain, open_on_ganache: Open
) -> None:
    chain = ganache_chain
    # A margin wider than any stall of this test: the payment stays within it throughout.
    service = await open_on_ganache(validity_margin_s=60)
    requirements = make_requirements(chain)
    key = chain.new_payer()
    valid_after = await _idle_past(chain)
    payload = sign_payment(key, requirements, valid_after=valid_after)
    nonce_before = relayer_nonce(chain)

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (False, _NOT_YET_VALID)
    message = verified.invalid_message or ""
    assert "not yet valid on this node's clock" in message
    assert f"try again from {valid_after + 61}" in message
    assert "expire" not in message
    assert (settled.success, settled.error_reason, settled.transaction) == (False, _NOT_YET_VALID, "")
    assert relayer_nonce(chain) == nonce_before


async def test_past_the_margin_a_payer_without_funds_is_refused_for_its_balance(
    ganache_chain: DevChain, open_on_ganache: Open
) -> None:
    chain = ganache_chain
    service = await open_on_ganache(validity_margin_s=0)
    requirements = make_requirements(chain)
    chain.new_payer()  # mines the head
    valid_after = await _idle_past(chain)
    payload = sign_payment(Account.create().key.to_0x_hex(), requirements, valid_after=valid_after)
    nonce_before = relayer_nonce(chain)

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements)

    reason = Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE
    assert (verified.is_valid, verified.invalid_reason) == (False, reason)
    assert (settled.success, settled.error_reason) == (False, reason)
    assert relayer_nonce(chain) == nonce_before


def _counting_overrides(node_url: str, asked: list[str]) -> Starlette:
    """A JSON-RPC front to `node_url` that notes each call carrying block overrides (a fourth parameter)."""

    async def forward(request: Request) -> Response:
        body = await request.body()
        calls = orjson.loads(body)
        for call in calls if isinstance(calls, list) else [calls]:
            if len(call.get("params") or []) > 3:
                asked.append(call["method"])
        async with httpx.AsyncClient(timeout=HANG_S) as client:
            answer = await client.post(node_url, content=body, headers={"content-type": "application/json"})
        return Response(answer.content, media_type="application/json")

    return Starlette(routes=[Route("/", forward, methods=["POST"])])


async def test_past_the_margin_payments_settle_and_the_node_is_asked_for_an_override_once(
    ganache_chain: DevChain, open_on_ganache: Open, asgi_server: Callable[..., str]
) -> None:
    chain = ganache_chain
    asked: list[str] = []
    service = await open_on_ganache(
        validity_margin_s=0, rpc_url=asgi_server(_counting_overrides(chain.rpc_url, asked))
    )
    requirements = make_requirements(chain)
    keys = [chain.new_payer(), chain.new_payer()]
    payee_before = chain.balance_of(PAY_TO)

    for key in keys:
        valid_after = await _idle_past(chain)
        settled = await service.settle(sign_payment(key, requirements, valid_after=valid_after), requirements)
        assert (settled.success, settled.error_reason) == (True, None)

    assert chain.balance_of(PAY_TO) == payee_before + 2 * requirements.amount
    assert asked == ["eth_estimateGas"]


def _pending_time(chain: DevChain) -> int:
    return int(chain.rpc.call("eth_getBlockByNumber", ["pending", False])["timestamp"], 16)


async def test_on_a_node_whose_clock_lags_a_payment_waits_for_that_clock_then_settles(
    lagging_hardhat_chain: DevChain, sqlite_url: str
) -> None:
    chain = lagging_hardhat_chain
    service = await Facilitator.open(facilitator_settings_on(chain, sqlite_url))
    try:
        requirements = make_requirements(chain)
        key = chain.new_payer()
        # Valid by the wall clock, not yet by the node's (HARDHAT_LAG_S or more behind it) for about ten
        # seconds: room for any stall before the verify.
        node_time = _pending_time(chain)
        valid_after = int(time.time()) - 2
        assert node_time <= valid_after - HARDHAT_LAG_S + 2
        payload = sign_payment(key, requirements, valid_after=valid_after)
        nonce_before = relayer_nonce(chain)

        refused = await service.verify(payload, requirements)

        assert (refused.is_valid, refused.invalid_reason) == (False, _NOT_YET_VALID)
        message = refused.invalid_message or ""
        assert "not yet valid on this node's clock" in message
        assert "s behind this facilitator's clock; try again in" in message
        assert "expire" not in message
        assert relayer_nonce(chain) == nonce_before
        await wait_until(lambda: _pending_time(chain) > valid_after, what="the node's clock past validAfter")
        payee_before = chain.balance_of(PAY_TO)
        settled = await service.settle(payload, requirements)
        assert (settled.success, settled.error_reason) == (True, None)
        assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    finally:
        await service.aclose()
