"""The Agent Card behind a real shared HTTP cache (hishel, RFC 9111), as a CDN or reverse proxy would be.

The cache sits in front of the merchant as ASGI middleware and is served with uvicorn; a counter behind it
shows which requests reached the merchant. `Vary: A2A-Version` must keep the versions apart: a cached 0.3
card is never served to a 1.0 client, nor the reverse, and the card for requests naming no version is a
variant of its own. The control case removes `Vary` from the
merchant's answers and shows the cache then does mix them up, so the main test can fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from hishel import AsyncSqliteStorage
from hishel.asgi import ASGICacheMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_x402.merchant.edge import AGENT_CARD_PATH, create_app
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import base_url_of, bind_loopback, serve_asgi

from .conftest import make_card, make_tenants
from .executors import ScriptedExecutor


@dataclass
class Origin:
    """The merchant behind the cache: counts the card requests that reach it, optionally drops `Vary`."""

    app: ASGIApp
    strip_vary: bool = False
    card_requests: int = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != AGENT_CARD_PATH:
            await self.app(scope, receive, send)
            return
        self.card_requests += 1

        async def forward(message: Message) -> None:
            if message["type"] == "http.response.start" and self.strip_vary:
                headers = [(k, v) for k, v in message["headers"] if k.lower() != b"vary"]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, forward)


@contextmanager
def cached_merchant(
    database_url: str, cache_dir: Path, *, strip_vary: bool = False
) -> Iterator[tuple[str, Origin]]:
    """The merchant edge behind a hishel shared cache; yields the cache's URL and the origin."""
    sock = bind_loopback()
    engine = create_engine(database_url)
    app = create_app(
        executor=ScriptedExecutor(), engine=engine, tenants=make_tenants(), card=make_card(base_url_of(sock))
    )
    origin = Origin(app, strip_vary=strip_vary)
    cache = ASGICacheMiddleware(origin, storage=AsyncSqliteStorage(database_path=cache_dir / "cache.db"))
    with serve_asgi(cache, sock=sock, on_exit=engine.dispose) as base_url:
        yield base_url, origin


async def fetch(http: httpx.AsyncClient, version: str | None) -> dict[str, object]:
    """The card as a client of `version` (None: a 0.3 client sending no header) receives it."""
    headers = {"A2A-Version": version} if version is not None else {}
    response = await http.get(AGENT_CARD_PATH, headers=headers)
    assert response.status_code == 200
    card: dict[str, object] = response.json()
    return card


def is_v1_0(card: dict[str, object]) -> bool:
    """A 1.0 card lists `supportedInterfaces`; a 0.3 card has `url` and `protocolVersion` instead."""
    return "supportedInterfaces" in card and "url" not in card


def kind(card: dict[str, object]) -> str | None:
    """Which card this is: "1.0", "0.3", or None for the card of requests naming no version (both)."""
    if is_v1_0(card):
        return "1.0"
    return None if "supportedInterfaces" in card else "0.3"


@pytest.mark.parametrize(
    "order", [(None, "1.0"), ("1.0", None), ("0.3", "1.0"), ("1.0", "0.3"), (None, "0.3"), ("0.3", None)]
)
async def test_cache_never_crosses_versions(
    sqlite_url: str, tmp_path: Path, order: tuple[str | None, str | None]
) -> None:
    first, second = order
    with cached_merchant(sqlite_url, tmp_path) as (base_url, origin):
        async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as http:
            cards = [await fetch(http, version) for version in (first, first, second, second, first)]
            reached = origin.card_requests

    assert [kind(card) for card in cards] == [first, first, second, second, first]
    # Each version was fetched from the merchant once; every repeat came from the cache.
    assert reached == 2
    assert cards[0] == cards[1] == cards[4]
    assert cards[2] == cards[3]


async def test_without_vary_the_cache_would_serve_a_0_3_card_to_1_0_clients(
    sqlite_url: str, tmp_path: Path
) -> None:
    with cached_merchant(sqlite_url, tmp_path, strip_vary=True) as (base_url, origin):
        async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as http:
            legacy = await fetch(http, None)
            current = await fetch(http, "1.0")

    assert not is_v1_0(legacy)
    assert current == legacy
    assert origin.card_requests == 1
