"""Small hostile merchants for the kit's bad-input tests: Starlette apps served on 127.0.0.1.

`hostile_app(card=..., jsonrpc=...)` serves a card (a JSON value, raw bytes, or a handler) and a JSON-RPC
endpoint (a handler); `good_card(base_url)` is a well-formed 1.0 card declaring the extension with one
JSON-RPC interface, so the kit goes on to the interface and meets the endpoint's misbehaviour.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a_x402.extension import EXTENSION_URI

__all__ = ["Handler", "good_card", "hang", "hostile_app"]

Handler = Callable[[Request], Awaitable[Response]]
PAY_TO = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f"
ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def good_card(base_url: str) -> dict[str, Any]:
    """A well-formed A2A 1.0 card declaring the extension, with one JSON-RPC interface at `base_url`."""
    return {
        "name": "hostile",
        "description": "a merchant the kit must not trust",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": f"{base_url}/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {
            "streaming": True,
            "extensions": [
                {
                    "uri": EXTENSION_URI,
                    "required": True,
                    "params": {
                        "networks": ["eip155:84532"],
                        "assets": [
                            {
                                "network": "eip155:84532",
                                "address": ASSET,
                                "name": "USDC",
                                "version": "2",
                                "decimals": 6,
                            }
                        ],
                        "payTo": [{"network": "eip155:84532", "address": PAY_TO}],
                    },
                }
            ],
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {"id": "s", "name": "s", "description": "s", "tags": ["t"], "examples": ["count these words"]}
        ],
    }


async def hang(_request: Request) -> Response:
    """Never answers (until the server shuts down)."""
    await asyncio.sleep(3600)
    return Response(status_code=204)


def hostile_app(
    *, card: Any = None, jsonrpc: Handler | None = None, base_url: Callable[[], str] | None = None
) -> Starlette:
    """The hostile merchant: `card` (JSON, bytes or a handler; default `good_card`) and `jsonrpc`."""

    async def serve_card(request: Request) -> Response:
        if callable(card):
            answer: Response = await card(request)
            return answer
        if isinstance(card, bytes):
            return Response(card, media_type="application/json")
        return JSONResponse(good_card(str(request.base_url).rstrip("/")) if card is None else card)

    async def not_found(_request: Request) -> Response:
        return Response("no", status_code=404)

    return Starlette(
        routes=[
            Route("/.well-known/agent-card.json", serve_card),
            Route("/a2a/jsonrpc", jsonrpc or not_found, methods=["POST"]),
        ]
    )
