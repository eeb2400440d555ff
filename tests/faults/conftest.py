"""Fault-suite fixtures: merchant processes on PostgreSQL, a threaded RPC proxy, a database probe.

Every scenario runs real `x402-merchant serve` processes against the session's anvil node (rolled back
after the test) and a fresh PostgreSQL database, then checks the invariants of `tests.fixtures.invariants`
from the chain and the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from devchain import DevChain
from tests.fixtures.merchant import DEFAULT_PAY_TO

from .database import DatabaseProbe
from .processes import MerchantProcesses, merchant_processes
from .proxy import ThreadedRpcProxy, threaded_rpc_proxy

PAY_TOS = (DEFAULT_PAY_TO,)
"""The payTo of every tenant the fault suite's merchants serve (the default tenant only)."""


@pytest.fixture
def first_block(chain: DevChain) -> int:
    """The first block of the scenario: transfers before it belong to earlier tests."""
    return int(chain.rpc.call("eth_blockNumber"), 16) + 1


@pytest.fixture
def merchants(chain: DevChain, postgres_url: str, tmp_path: Path) -> Iterator[MerchantProcesses]:
    """Start `x402-merchant serve` processes on the test chain and a fresh PostgreSQL database."""
    with merchant_processes(chain, postgres_url, tmp_path) as processes:
        yield processes


@pytest.fixture
def proxy(chain: DevChain) -> Iterator[ThreadedRpcProxy]:
    """A proxy to the test chain's node that can hold requests or cut the node off."""
    with threaded_rpc_proxy(chain.rpc_url) as running:
        yield running


@pytest.fixture
async def database(postgres_url: str) -> AsyncIterator[DatabaseProbe]:
    """Locks, waits and connection kills on the merchants' PostgreSQL database."""
    probe = DatabaseProbe(postgres_url)
    try:
        yield probe
    finally:
        await probe.aclose()
