"""`x402-merchant check` asks a remote facilitator whether it admits this merchant: no key where one is
needed, or a refused key, is a problem (not fatal) naming X402_FACILITATOR_API_KEY, never the key."""

from __future__ import annotations

from collections.abc import Callable

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ApiKeyStore, create_app
from a2a_x402.merchant.checks import check_remote_facilitator
from a2a_x402.storage import create_engine
from tests.fixtures.facilitator import facilitator_settings_on


async def test_the_check_says_whether_the_facilitator_admits_the_merchants_key(
    chain: DevChain, sqlite_url: str, asgi_server: Callable[..., str]
) -> None:
    settings = facilitator_settings_on(chain, sqlite_url, facilitator_public=False)
    url = asgi_server(create_app(settings=settings))
    engine = create_engine(sqlite_url)
    try:
        record, key = await ApiKeyStore(engine).create("merchant")
        _other, revoked = await ApiKeyStore(engine).create("old merchant")
        assert await ApiKeyStore(engine).revoke(_other.id)
    finally:
        await engine.dispose()

    admitted = await check_remote_facilitator(url, chain.network, door=True, api_key=key)
    without = await check_remote_facilitator(url, chain.network, door=True)
    refused = await check_remote_facilitator(url, chain.network, door=True, api_key=revoked)

    assert admitted.ok, admitted.detail
    assert (without.ok, without.fatal) == (False, False)
    assert "requires an API key: set X402_FACILITATOR_API_KEY" in without.detail
    assert (refused.ok, refused.fatal) == (False, False)
    assert "refuses this merchant's API key: check X402_FACILITATOR_API_KEY" in refused.detail
    assert revoked not in refused.detail and record.id not in refused.detail
    readiness = await check_remote_facilitator(url, chain.network)  # what /readyz asks: no door probe
    assert readiness.ok, readiness.detail
