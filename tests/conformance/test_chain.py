"""The kit's chain reader treats the node as untrusted: a huge answer is cut off, a slow one times out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from a2a_x402.conformance._chain import ChainError, ChainReader

_HUGE = b'{"jsonrpc": "2.0", "id": 1, "result": "0x' + b"0" * 3_000_000 + b'"}'


def _node(answer: Callable[[Request], Response]) -> Starlette:
    async def rpc(request: Request) -> Response:
        return answer(request)

    return Starlette(routes=[Route("/", rpc, methods=["POST"])])


async def _chunks() -> AsyncIterator[bytes]:
    # No Content-Length: the cap must hold while the body is read, not only from the header.
    for start in range(0, len(_HUGE), 64 * 1024):
        yield _HUGE[start : start + 64 * 1024]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (lambda _r: Response(_HUGE, media_type="application/json"), "declares"),
        (lambda _r: StreamingResponse(_chunks(), media_type="application/json"), "larger than the cap"),
    ],
    ids=["declared", "streamed"],
)
async def test_a_huge_node_answer_is_cut_off(
    asgi_server: Callable[..., str], answer: Callable[[Request], Response], expected: str
) -> None:
    reader = ChainReader(asgi_server(_node(answer)) + "/", timeout_s=15.0, max_bytes=1_000_000)
    try:
        with pytest.raises(ChainError, match=expected):
            await reader.block_number()
    finally:
        await reader.aclose()


async def test_a_node_answer_within_the_cap_is_read(asgi_server: Callable[..., str]) -> None:
    node = _node(lambda _r: Response(b'{"jsonrpc": "2.0", "id": 1, "result": "0x2a"}'))
    reader = ChainReader(asgi_server(node) + "/", timeout_s=15.0, max_bytes=1_000)
    try:
        assert await reader.block_number() == 42
    finally:
        await reader.aclose()


async def test_a_node_that_never_finishes_times_out(asgi_server: Callable[..., str]) -> None:
    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc": "2.0", '
        await asyncio.Event().wait()  # never set: the answer never ends

    node = _node(lambda _r: StreamingResponse(trickle(), media_type="application/json"))
    reader = ChainReader(asgi_server(node) + "/", timeout_s=0.5)
    try:
        with pytest.raises(ChainError, match="did not answer within"):
            await reader.block_number()
    finally:
        await reader.aclose()
