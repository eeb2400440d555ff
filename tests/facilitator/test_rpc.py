"""The JSON-RPC client's pace: a node that works through calls one after another is sent only as many at
once as it answers well within the timeout (a burst that would outlast it as one batch all answers, and
fifty concurrent settles all settle), and a fast node still gets whole batches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator._rpc import MAX_BATCH, RpcCall, RpcClient
from a2a_x402.payer import sign_payment
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.faults import slow_node

from .conftest import OpenFacilitator

# The slow node's time per call and the client's timeout: a burst of `_BURST` calls in one batch would take
# 1.6 s, past the timeout, while each request sized to a quarter of it takes about 0.25 s.
_PER_CALL_S = 0.01
_TIMEOUT_S = 1.0
_BURST = 160
# Fifty settles' first reads, sent at once, take about 1.5 s at this pace: past the timeout.
_SETTLE_PER_CALL_S = 0.005


async def test_a_burst_on_a_node_that_answers_one_call_at_a_time_all_answers(devchain: DevChain) -> None:
    async with slow_node(devchain.rpc_url, _PER_CALL_S) as node:
        rpc = RpcClient(node.url, timeout_s=_TIMEOUT_S)
        try:
            await rpc.call("eth_chainId")  # a lone call measures nothing of the pace: the burst must
            answers = await asyncio.gather(*(rpc.call("eth_chainId") for _ in range(_BURST)))
        finally:
            await rpc.aclose()

    assert answers == [hex(devchain.chain_id)] * _BURST
    # Its first request (of a node not yet measured) taught the client the node's pace: the rest went out
    # in requests each of which takes at most about a quarter of the timeout.
    first, *rest = node.sizes[1:]
    assert first <= 32 and rest and max(rest) <= _TIMEOUT_S / 4 / _PER_CALL_S * 1.5
    assert sum(node.sizes) == _BURST + 1


async def test_a_fast_node_gets_whole_batches(devchain: DevChain) -> None:
    async with slow_node(devchain.rpc_url, 0.0) as node:
        rpc = RpcClient(node.url)
        try:
            # A node is given twice the calls it answered in time, from 32: a few round trips to full size.
            for burst in (32, 64, 128, MAX_BATCH):
                await asyncio.gather(*(rpc.call("eth_chainId") for _ in range(burst)))
            split = await rpc.batch([_chain_id()] * (MAX_BATCH * 2))
        finally:
            await rpc.aclose()

    assert node.sizes == [32, 64, 128, MAX_BATCH, MAX_BATCH, MAX_BATCH]
    assert split == [hex(devchain.chain_id)] * (MAX_BATCH * 2)


def _chain_id() -> RpcCall:
    return RpcCall("eth_chainId", [])


async def test_fifty_concurrent_settles_on_a_node_that_answers_one_call_at_a_time_all_settle(
    chain: DevChain,
    sqlite_url: str,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
) -> None:
    """As on ganache under fifty concurrent settles: every one answers from the chain (settled once), none
    with "the chain could not be reached" because one batch of everyone's reads outlasted the timeout."""
    requirements = make_requirements(chain)
    payloads = [sign_payment(new_payer(), requirements) for _ in range(50)]
    payee_before = chain.balance_of(PAY_TO)
    async with slow_node(chain.rpc_url, _SETTLE_PER_CALL_S) as node:
        service = await open_facilitator(
            sqlite_url, rpc_url=node.url, rpc_timeout_s=_TIMEOUT_S, receipt_timeout_s=60.0
        )
        answers = await asyncio.gather(*(service.settle(p, requirements) for p in payloads))
        await service.aclose()

    assert [(a.success, a.error_reason) for a in answers] == [(True, None)] * 50, answers
    assert chain.balance_of(PAY_TO) == payee_before + 50 * requirements.amount
