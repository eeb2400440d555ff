"""`probe_transfer_method`: the dev chain's tokens, and a node that does not answer."""

from __future__ import annotations

import logging

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import RpcClient
from a2a_x402.merchant.payments import TransferMethod, probe_transfer_method
from tests.fixtures.servers import free_port


async def test_a_token_with_eip3009_is_paid_by_it_and_any_other_through_permit2(chain: DevChain) -> None:
    no_code = Account.create().address  # nothing answers there, so nothing has EIP-3009
    rpc = RpcClient(chain.rpc_url)
    try:
        found = [
            await probe_transfer_method(rpc, token)
            for token in (chain.asset, chain.plain_asset, chain.permit_asset, no_code)
        ]
    finally:
        await rpc.aclose()

    assert found == [
        TransferMethod.EIP3009,
        TransferMethod.PERMIT2,
        TransferMethod.PERMIT2,
        TransferMethod.PERMIT2,
    ]


async def test_a_node_that_does_not_answer_leaves_eip3009_and_says_so(
    chain: DevChain, caplog: pytest.LogCaptureFixture
) -> None:
    rpc = RpcClient(f"http://127.0.0.1:{free_port()}", timeout_s=2.0)
    try:
        with caplog.at_level(logging.WARNING, logger="a2a_x402.merchant.payments._transfer_method"):
            method = await probe_transfer_method(rpc, chain.plain_asset)
    finally:
        await rpc.aclose()

    assert method is TransferMethod.EIP3009
    [line] = [r for r in caplog.records if r.name == "a2a_x402.merchant.payments._transfer_method"]
    assert line.levelno == logging.WARNING and "X402_ASSET_TRANSFER_METHOD" in line.getMessage()
