"""The floor of our HTTP stack: uvicorn and Starlette answering a trivial `POST /settle` with a fixed body.

The facilitator's CPU per settlement holds its HTTP serving (uvicorn's protocol, Starlette's request,
routing and response, the sockets' system time) beside the settlement's own work. This app keeps only the
first part: the same server settings as ``x402-facilitator serve`` (one worker, uvicorn's default loop and
HTTP parser, which are uvloop and httptools when installed, no access log, the same keep-alive), a
Starlette route that reads the whole request body as the facilitator does, and an answer the size of a
settlement's. What it costs per request is what no settle path on this stack can go below.

Each answer is held for ``BENCH_FLOOR_HOLD_S`` seconds (default 0): the benchmark holds it for our
settlements' median latency, so the floor is measured at their rate and concurrency. Served as fast as it
can be, the app would cost a third as much per request (about 0.03 against 0.09 ms measured), because
the event loop then handles many requests per wake-up, which a server at a settlement's rate never does.

Run with ``uvicorn --factory bench._http_floor_app:create_app``.
"""

from __future__ import annotations

import asyncio
import os

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["HOLD_ENV", "SETTLE_SIZED_ANSWER", "create_app"]

HOLD_ENV = "BENCH_FLOOR_HOLD_S"

SETTLE_SIZED_ANSWER = orjson.dumps(
    {
        "success": True,
        "payer": "0x" + "ab" * 20,
        "transaction": "0x" + "cd" * 32,
        "network": "eip155:31337",
        "amount": "1000",
    }
)
"""The fixed answer: a successful settlement's fields with values of their real lengths."""


async def _healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


def create_app() -> Starlette:
    """The floor app: `POST /settle` (reads the body, holds the answer, answers SETTLE_SIZED_ANSWER) and
    `GET /healthz`."""
    hold_s = float(os.environ.get(HOLD_ENV, "0"))

    async def _settle(request: Request) -> Response:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
        if hold_s > 0:
            await asyncio.sleep(hold_s)
        return Response(SETTLE_SIZED_ANSWER, media_type="application/json")

    return Starlette(
        routes=[Route("/settle", _settle, methods=["POST"]), Route("/healthz", _healthz, methods=["GET"])]
    )
