"""The reference merchant on loopback for payer tests, and the faults a network can cause.

``merchant(...)`` starts the real reference merchant (``merchant.app.build_app``) on the session chain with a
fresh SQLite database; ``card_edit`` rewrites the Agent Card it serves, to play a card that disagrees with
the merchant's terms. ``FaultyTransport`` forwards to the real server and loses one chosen request or its
answer, or corrupts it in flight: faults that cannot be caused on loopback otherwise.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, MutableMapping
from enum import Enum
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.app import build_app
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.tenants import TenantRegistry
from tests.fixtures.merchant import MerchantStarter, RunningMerchant, chain_settings, own_relayer_key
from tests.fixtures.servers import base_url_of, bind_loopback

from .ap2_shop import Wire, start_shop

PRICE = 250_000
PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"
TENANT = "acme"
TENANT_PAY_TO = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"  # anvil account 7
TEXT = "The quick brown fox. The dog sleeps."

CardEdit = Callable[[dict[str, Any]], None]


class _CardEditor:
    """ASGI wrapper that serves the wrapped app's Agent Card after ``edit`` changed it."""

    def __init__(self, app: ASGIApp, edit: CardEdit) -> None:
        self._app = app
        self._edit = edit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != AGENT_CARD_WELL_KNOWN_PATH:
            await self._app(scope, receive, send)
            return
        start: MutableMapping[str, Any] = {}
        body = bytearray()

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))

        await self._app(scope, receive, capture)
        card = json.loads(body)
        self._edit(card)
        data = json.dumps(card).encode()
        headers = [(k, v) for k, v in start["headers"] if k.lower() not in (b"content-length", b"etag")]
        headers.append((b"content-length", str(len(data)).encode()))
        await send({"type": "http.response.start", "status": start["status"], "headers": headers})
        await send({"type": "http.response.body", "body": data})


@pytest.fixture
def merchant(chain: DevChain, sqlite_url: str, asgi_server: Callable[..., str]) -> Callable[..., str]:
    """``start(*, tenants=None, card_edit=None, **settings) -> base_url``: the merchant, PRICE to PAY_TO.

    Keyword arguments beyond the two named ones override ``MerchantSettings`` fields.
    """

    def start(
        *, tenants: TenantRegistry | None = None, card_edit: CardEdit | None = None, **overrides: Any
    ) -> str:
        sock = bind_loopback()
        settings = MerchantSettings.model_validate(
            {
                "database_url": sqlite_url,
                **chain_settings(chain),
                # Several merchants of one test share its database: each needs a relayer key of its own.
                "relayer_key": own_relayer_key(chain),
                "pay_to": PAY_TO,
                "price": PRICE,
                "public_url": base_url_of(sock),
                **overrides,
            }
        )
        app: ASGIApp = build_app(settings, tenants=tenants)
        if card_edit is not None:
            app = _CardEditor(app, card_edit)
        return asgi_server(app, sock=sock)

    return start


class Fault(Enum):
    """What the network does to a request."""

    LOSE_REQUEST = "lose-request"
    """The connection fails before the server sees the request."""
    LOSE_ANSWER = "lose-answer"
    """The server processes the request; its whole answer is then lost (connection reset)."""
    CORRUPT_SIGNATURE = "corrupt-signature"
    """One hex digit of the payment's signature is changed on the way."""


def is_payment_submission(request: httpx.Request) -> bool:
    """Whether ``request`` carries a signed payment (``payment-submitted``)."""
    return b'"payment-submitted"' in request.content


class FaultyTransport(httpx.AsyncBaseTransport):
    """Forwards to the real server, applying ``fault`` to the first ``times`` requests ``select`` picks.

    ``selected`` records every picked request, so a test can compare what the client sent each time.
    """

    def __init__(
        self,
        fault: Fault,
        *,
        times: int = 1,
        select: Callable[[httpx.Request], bool] = is_payment_submission,
    ) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._fault = fault
        self._remaining = times
        self._select = select
        self.selected: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self._select(request):
            return await self._inner.handle_async_request(request)
        self.selected.append(request)
        if self._remaining == 0:
            return await self._inner.handle_async_request(request)
        self._remaining -= 1
        if self._fault is Fault.LOSE_REQUEST:
            raise httpx.ConnectError("injected: connection refused", request=request)
        if self._fault is Fault.CORRUPT_SIGNATURE:
            return await self._inner.handle_async_request(_with_corrupt_signature(request))
        response = await self._inner.handle_async_request(request)
        await response.aread()  # the server has processed the request and answered in full
        await response.aclose()
        raise httpx.ReadError("injected: connection reset before the answer arrived", request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _with_corrupt_signature(request: httpx.Request) -> httpx.Request:
    document = json.loads(request.content)
    metadata = document.get("params", document)["message"]["metadata"]
    payload = next(iter(metadata.values()))["payload"]["payload"]
    signature = payload["signature"]
    payload["signature"] = signature[:10] + ("0" if signature[10] != "0" else "1") + signature[11:]
    headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
    return httpx.Request(request.method, request.url, headers=headers, content=json.dumps(document).encode())


def sent_message(request: httpx.Request) -> dict[str, Any]:
    """The A2A message a SendMessage request carried (JSON-RPC or HTTP+JSON)."""
    document = json.loads(request.content)
    message: dict[str, Any] = document.get("params", document)["message"]
    return message


@pytest.fixture
def user_key() -> Any:
    """The trusted surface's key: the AP2 merchant (`shop`) trusts the open mandates it issues."""
    from tests.fixtures.ap2 import new_key

    return new_key("trusted-surface")


@pytest.fixture
def shop(start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path, user_key: Any) -> RunningMerchant:
    """The merchant of the AP2 tests (`ap2_shop.start_shop`)."""
    return start_shop(start_merchant, sqlite_url, tmp_path, user_key)


@pytest.fixture
async def wire() -> AsyncIterator[Wire]:
    """The wire between an AP2 test's payer and `shop` (`ap2_shop.Wire`)."""
    transport = Wire()
    yield transport
    await transport.aclose()
