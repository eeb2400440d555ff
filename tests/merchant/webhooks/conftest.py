"""Webhook fixtures: a ledger wired to the real outbox, endpoints, and a fast delivery worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import DeliveryWorker, Outbox, RetryPolicy, WebhookEndpoints, generate_secret
from tests.fixtures.deadlines import HANG_S

# Short enough for tests: 13 attempts over ~2.6 s (the outage test retries for longer, see there).
FAST_RETRY = RetryPolicy(delays_s=(0.05, 0.1, 0.1, 0.2, 0.2, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3))
SECRET = generate_secret()


@pytest.fixture
def outbox(engine: AsyncEngine) -> Outbox:
    """The outbox in `engine`."""
    return Outbox(engine)


@pytest.fixture
def ledger(engine: AsyncEngine, outbox: Outbox) -> Ledger:
    """A ledger whose facts go to the real outbox."""
    return Ledger(engine, outbox)


@pytest.fixture
def endpoints(engine: AsyncEngine) -> WebhookEndpoints:
    """Endpoint management in `engine`."""
    return WebhookEndpoints(engine)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP client workers send with; no keep-alive, so receivers stop at once at teardown."""
    async with httpx.AsyncClient(timeout=HANG_S, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        yield client


WorkerFactory = Callable[..., DeliveryWorker]

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
"""For tests of HTTP behaviour that the database backend cannot change: run them once."""


@pytest.fixture
def make_worker(engine: AsyncEngine, client: httpx.AsyncClient) -> WorkerFactory:
    """Build a worker on `engine` with the fast schedule, allowed to reach 127.0.0.1; kwargs override."""

    def make(**overrides: object) -> DeliveryWorker:
        options: dict[str, object] = {
            "retry": FAST_RETRY,
            "allow_private_targets": True,
            "lease_s": 5.0,
            "timeout_s": 2.0,
        }
        options.update(overrides)
        return DeliveryWorker(engine, client, **options)  # type: ignore[arg-type]

    return make


async def drain(
    worker: DeliveryWorker, done: Callable[[], Awaitable[bool]], timeout_s: float = HANG_S
) -> None:
    """Run delivery passes until `done()` holds; fail after `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await done():
        if loop.time() > deadline:
            raise AssertionError(f"not done after {timeout_s} s")
        if await worker.run_once() == 0:
            await asyncio.sleep(0.01)
