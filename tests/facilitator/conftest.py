"""Fixtures of the facilitator tests: facilitators on either claim store, and the HTTP service on uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator, FacilitatorSettings, create_app
from tests.fixtures.facilitator import facilitator_settings_on

OpenFacilitator = Callable[..., Awaitable[Facilitator]]
StartService = Callable[..., str]


@pytest.fixture
def settings_for(chain: DevChain) -> Callable[..., FacilitatorSettings]:
    """`settings_for(database_url, **changes)`: settings for the session chain and that claim store."""

    def build(database_url: str, **changes: Any) -> FacilitatorSettings:
        return facilitator_settings_on(chain, database_url, **changes)

    return build


@pytest.fixture
async def open_facilitator(
    settings_for: Callable[..., FacilitatorSettings],
) -> AsyncIterator[OpenFacilitator]:
    """`await open_facilitator(database_url, **changes)`: an in-process facilitator, closed after the test."""
    opened: list[Facilitator] = []

    async def start(database_url: str, **changes: Any) -> Facilitator:
        service = await Facilitator.open(settings_for(database_url, **changes))
        opened.append(service)
        return service

    try:
        yield start
    finally:
        for service in opened:
            await service.aclose()


@pytest.fixture
def start_service(
    chain: DevChain, asgi_server: StartService, settings_for: Callable[..., FacilitatorSettings]
) -> StartService:
    """`start_service(database_url, **changes) -> base URL`: the HTTP service on uvicorn until the test ends.

    The facilitator opens in the server's own event loop (its lifespan), as in production.
    """

    def start(database_url: str, **changes: Any) -> str:
        return asgi_server(create_app(settings=settings_for(database_url, **changes)))

    return start
