"""The x402 facilitator HTTP API: `POST /verify`, `POST /settle`, `GET /supported`, `GET /healthz`.

Every `/verify` and `/settle` answer is the operation's x402 response body. Following the x402 facilitator
API (its §7 answers, the SDKs' facilitator protocol, and the SDK clients, which read no other status), a
payment that fails a check and a request that cannot be parsed are both HTTP 200 with `isValid: false` /
`success: false` and the reason (`_malformed`). Only what x402 gives a status of its own differs: an
idempotency key reused for another payment is 409 (the `payment-identifier` extension) and a malformed
`Idempotency-Key` header 400, still with a settle body. Requests of x402 version 1 get version 1 answers.
`POST /settle/status` (same body as `/settle`, not part of x402) reports, and finishes, a settlement that
was answered `settlement_pending`; it refuses a body it cannot parse with a 400 and a settle body, and an
authorization never presented with a 404.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from ._config import FacilitatorSettings
from ._errors import ChainError, IdempotencyConflictError, InvalidIdempotencyKeyError
from ._malformed import settle_refusal, verify_refusal
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


# The one table of the HTTP statuses of refusals that are not HTTP 200; their bodies are settle answers.
_HTTP_STATUS: dict[type[Exception], int] = {
    InvalidIdempotencyKeyError: 400,
    IdempotencyConflictError: 409,
}
# A refused idempotency key is a problem of the request, which x402 names only as its payload.
_KEY_REASON = Reason.INVALID_PAYLOAD


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

    @app.post("/verify")
    async def verify(request: Request) -> Response:
        data: object = None
        try:
            data = await _read_json(request)
            parsed = parse_verify_request(data)
            payload, requirements = request_to_v2(parsed)
        except WireError as exc:
            return _json(verify_refusal(data, exc.reason, exc.message))
        answer = await request.app.state.facilitator.verify(payload, requirements)
        return _json(verify_response_to_v1(answer) if isinstance(parsed, VerifyRequestV1) else answer)

    @app.post("/settle")
    async def settle(request: Request) -> Response:
        service: Facilitator = request.app.state.facilitator
        data: object = None
        try:
            data = await _read_json(request)
            parsed = parse_settle_request(data)
            payload, requirements = request_to_v2(parsed)
        except WireError as exc:
            return _json(settle_refusal(data, exc.reason, exc.message, service.network))
        try:
            answer = await service.settle(
                payload, requirements, idempotency_key=request.headers.get("idempotency-key")
            )
        except (InvalidIdempotencyKeyError, IdempotencyConflictError) as exc:
            body = settle_refusal(data, _KEY_REASON, str(exc), service.network)
            return _json(body, _HTTP_STATUS[type(exc)])
        return _json(settle_response_to_v1(answer) if isinstance(parsed, SettleRequestV1) else answer)

    @app.post("/settle/status")
    async def settle_status(request: Request) -> Response:
        service: Facilitator = request.app.state.facilitator
        data: object = None
        try:
            data = await _read_json(request)
            parsed = parse_settle_request(data)
            payload, requirements = request_to_v2(parsed)
        except WireError as exc:
            return _json(settle_refusal(data, exc.reason, exc.message, service.network), 400)
        answer = await service.settlement_status(payload, requirements, timeout_s=1.0)
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
