"""Payment-layer fixtures: the reference merchant over each binding, and a fresh payer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from a2a_x402.devchain import DevChain
from tests.fixtures.merchant import BINDINGS, MerchantStarter, MerchantWire, RunningMerchant


@pytest.fixture(params=BINDINGS)
def binding(request: pytest.FixtureRequest) -> str:
    """Each A2A binding in turn."""
    name: str = request.param
    return name


@pytest.fixture
async def http(merchant: RunningMerchant) -> AsyncIterator[httpx.AsyncClient]:
    """An A2A 1.0 client of the default merchant with the extension activated."""
    async with merchant.http() as client:
        yield client


@pytest.fixture
def wire(http: httpx.AsyncClient, binding: str) -> MerchantWire:
    """Raw A2A calls to the default merchant's default tenant over the binding under test."""
    return MerchantWire(http, binding)


@pytest.fixture
def payer_key(chain: DevChain) -> str:
    """A fresh payer holding 1000 dev USDC and no ETH."""
    return chain.new_payer()


@pytest.fixture
def sqlite_merchant(start_merchant: MerchantStarter, sqlite_url: str) -> RunningMerchant:
    """The default merchant on SQLite only, for behaviour that does not depend on the database."""
    return start_merchant(sqlite_url)


@pytest.fixture
async def sqlite_wire(sqlite_merchant: RunningMerchant, binding: str) -> AsyncIterator[MerchantWire]:
    """Raw A2A calls to `sqlite_merchant` over the binding under test."""
    async with sqlite_merchant.http() as client:
        yield MerchantWire(client, binding)
