"""The x402 facilitator HTTP API: `POST /verify`, `POST /settle`, `GET /supported`, `GET /healthz`.

Following the x402 facilitator API, a payment that fails a check is an HTTP 200 with `isValid: false` /
`success: false`; 4xx answers are for requests that are not well-formed x402 bodies. Requests of x402
version 1 get version 1 answers. `POST /settle/status` (same body as `/settle`) reports, and finishes, a
settlement that was answered `settlement_pending`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from ._config import FacilitatorSettings
from ._errors import ChainError, FacilitatorError, IdempotencyConflictError, InvalidIdempotencyKeyError
from ._service import Facilitator
from .wire import (
    Reason,
    SettleRequestV1,
    VerifyRequestV1,
    WireError,
    WireModel,
    parse_settle_request,
    parse_verify_request,
    request_to_v2,
    settle_response_to_v1,
    verify_response_to_v1,
)

__all__ = ["create_app"]

MAX_BODY_BYTES = 64 * 1024


def _json(body: dict[str, Any] | WireModel, status_code: int = 200) -> Response:
    content = body.to_json_dict() if isinstance(body, WireModel) else body
    return Response(orjson.dumps(content), status_code=status_code, media_type="application/json")


def _problem(status_code: int, error: str, message: str) -> Response:
    return _json({"error": error, "message": message}, status_code)


# The one table from the errors a request can cause to HTTP statuses; the body names the error's code.
_HTTP_STATUS: dict[type[WireError | FacilitatorError], int] = {
    WireError: 400,
    InvalidIdempotencyKeyError: 400,
    IdempotencyConflictError: 409,
}


def _error_answer(status_code: int) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def answer(_request: Request, exc: Exception) -> Response:
        code = exc.code if isinstance(exc, WireError | FacilitatorError) else "internal_error"
        return _problem(status_code, code, str(exc))

    return answer


async def _read_json(request: Request) -> object:
    """The request body as JSON, or a WireError naming what is wrong with it."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise WireError(Reason.INVALID_PAYLOAD, f"the body must be at most {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise WireError(Reason.INVALID_PAYLOAD, f"the body must be at most {MAX_BODY_BYTES} bytes")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise WireError(Reason.INVALID_PAYLOAD, "the body is not valid JSON") from None


def create_app(
    facilitator: Facilitator | None = None, *, settings: FacilitatorSettings | None = None
) -> FastAPI:
    """The HTTP app around `facilitator`, or around one opened from `settings` in the app's lifespan."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if facilitator is not None:
            app.state.facilitator = facilitator
            yield
            return
        opened = await Facilitator.open(settings or FacilitatorSettings())
        app.state.facilitator = opened
        try:
            yield
        finally:
            await opened.aclose()

    app = FastAPI(title="x402 facilitator", lifespan=lifespan, docs_url=None, redoc_url=None)
    for error_type, status_code in _HTTP_STATUS.items():
        app.add_exception_handler(error_type, _error_answer(status_code))

    @app.post("/verify")
    async def verify(request: Request) -> Response:
        parsed = parse_verify_request(await _read_json(request))
        payload, requirements = request_to_v2(parsed)
        answer = await request.app.state.facilitator.verify(payload, requirements)
        return _json(verify_response_to_v1(answer) if isinstance(parsed, VerifyRequestV1) else answer)

    @app.post("/settle")
    async def settle(request: Request) -> Response:
        parsed = parse_settle_request(await _read_json(request))
        payload, requirements = request_to_v2(parsed)
        answer = await request.app.state.facilitator.settle(
            payload, requirements, idempotency_key=request.headers.get("idempotency-key")
        )
        return _json(settle_response_to_v1(answer) if isinstance(parsed, SettleRequestV1) else answer)

    @app.post("/settle/status")
    async def settle_status(request: Request) -> Response:
        parsed = parse_settle_request(await _read_json(request))
        payload, requirements = request_to_v2(parsed)
        answer = await request.app.state.facilitator.settlement_status(payload, requirements, timeout_s=1.0)
        if answer is None:
            return _problem(
                404, "settlement_not_found", "this authorization was never presented for settlement"
            )
        return _json(settle_response_to_v1(answer) if isinstance(parsed, SettleRequestV1) else answer)

    @app.get("/supported")
    async def supported(request: Request) -> Response:
        return _json(request.app.state.facilitator.supported())

    @app.get("/healthz")
    async def healthz(request: Request) -> Response:
        service: Facilitator = request.app.state.facilitator
        try:
            head = await service.head_block()
        except ChainError as exc:
            return _problem(503, "chain_unavailable", str(exc))
        return _json(
            {"status": "ok", "network": service.network, "relayer": service.relayer_address, "head": head}
        )

    return app
