"""The facilitator's start-up with a node that is slow, not absent (`_node_start`).

Under load (two deployments starting on one node and database, a load average of 15-20 on two cores) the
start-up's first read, eth_chainId, once got no answer within the RPC timeout, and the deployment refused
to start as if X402_RPC_URL were wrong. A node that took the request is asked again, a few times; one that
keeps silent, or cannot be reached, still refuses the start with the hint.
"""

from __future__ import annotations

import logging

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ChainUnavailableError
from a2a_x402.facilitator._node_start import START_ATTEMPTS
from tests.fixtures.faults import rpc_proxy

from .conftest import OpenFacilitator
from .payments import relayer_address

# Short, so a held answer is a timeout at once; the held answers are released only at the block's end.
_TIMEOUT_S = 0.3


async def test_a_node_silent_on_the_first_chain_id_read_is_asked_again_and_the_start_goes_on(
    chain: DevChain, sqlite_url: str, open_facilitator: OpenFacilitator, caplog: pytest.LogCaptureFixture
) -> None:
    async with rpc_proxy(chain.rpc_url) as node:
        held = node.hold(b"eth_chainId")
        with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
            service = await open_facilitator(sqlite_url, rpc_url=node.url, rpc_timeout_s=_TIMEOUT_S)
        held.release.set()

        assert service.relayer_address == relayer_address(chain)
        assert sum(b"eth_chainId" in request for request in node.requests) >= 2
        [warning] = [r.getMessage() for r in caplog.records if "start-up attempt" in r.getMessage()]
        assert f"attempt 1 of {START_ATTEMPTS}" in warning
        assert "no answer in time" in warning


async def test_a_node_silent_on_every_attempt_refuses_the_start_with_the_hint(
    chain: DevChain, sqlite_url: str, open_facilitator: OpenFacilitator
) -> None:
    async with rpc_proxy(chain.rpc_url) as node:
        faults = [node.hold(b"eth_chainId") for _ in range(START_ATTEMPTS)]
        with pytest.raises(ChainUnavailableError, match="check X402_RPC_URL") as refused:
            await open_facilitator(sqlite_url, rpc_url=node.url, rpc_timeout_s=_TIMEOUT_S)
        for fault in faults:
            fault.release.set()

    assert f"({START_ATTEMPTS} times)" in str(refused.value)
    assert sum(b"eth_chainId" in request for request in node.requests) == START_ATTEMPTS
