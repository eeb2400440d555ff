"""A merchant whose start fails closes what it opened.

Its start-up reads the chain (the in-process facilitator's chain id): when that fails, the lifespan raises,
and the connection pools opened by then must be closed, not left to the garbage collector, which reports
each as an asyncio ERROR ("Unclosed client session") at a moment of its own, in whatever runs then (under
load, a later test of the same worker).
"""

from __future__ import annotations

import gc
from typing import Any

import aiohttp

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ChainUnavailableError
from a2a_x402.merchant.app import build_app
from a2a_x402.merchant.settings import MerchantSettings
from tests.fixtures.merchant import DEFAULT_PAY_TO, DEFAULT_PRICE, chain_settings
from tests.fixtures.servers import free_port


def _open_sessions() -> set[int]:
    """The aiohttp sessions of this process not closed (the chain clients' pools)."""
    gc.collect()
    return {id(o) for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession) and not o.closed}


async def _refusal_to_start(settings: MerchantSettings) -> str:
    """Why the app `settings` configure refuses to start."""
    app = build_app(settings)
    try:
        async with app.router.lifespan_context(app):
            pass
    except ChainUnavailableError as exc:
        return str(exc)
    raise AssertionError("the merchant started")


async def test_a_start_refused_for_an_unreachable_node_leaves_no_connection_open(
    chain: DevChain, sqlite_url: str
) -> None:
    values: dict[str, Any] = {
        **chain_settings(chain),
        "rpc_url": f"http://127.0.0.1:{free_port()}",  # nothing listens there
        "database_url": sqlite_url,
        "pay_to": DEFAULT_PAY_TO,
        "price": DEFAULT_PRICE,
        "_env_file": None,
    }
    settings = MerchantSettings(**values)
    before = _open_sessions()

    refusal = await _refusal_to_start(settings)

    assert "check X402_RPC_URL" in refusal
    assert _open_sessions() - before == set()
