"""The x402 facilitator HTTP API: `POST /verify`, `POST /settle`, `GET /supported`, and for operators
`GET /healthz` (liveness), `GET /readyz` (claim store, chain, relayer funds) and `GET /metrics` (Prometheus).

Every `/verify` and `/settle` answer is the operation's x402 response body. Following the x402 facilitator
API (its §7 answers, the SDKs' facilitator protocol, and the SDK clients, which read no other status), a
payment that fails a check and a request that cannot be parsed are both HTTP 200 with `isValid: false` /
`success: false` and the reason (`_malformed`). Only what x402 gives a status of its own differs: an
idempotency key reused for another payment is 409 (the `payment-identifier` extension) and a malformed
`Idempotency-Key` header 400, still with a settle body. Requests of x402 version 1 get version 1 answers.
`POST /settle/status` (same body as `/settle`, not part of x402) reports, and finishes, a settlement that
was answered `settlement_pending`; it refuses a body it cannot parse with a 400 and a settle body, and an
authorization never presented with a 404.

A request body is read up to `X402_FACILITATOR_MAX_BODY_BYTES` (a larger one is a request that cannot be
parsed, refused before it is read) and within `X402_FACILITATOR_BODY_TIMEOUT_S`: a body still arriving then
is answered 408 with the operation's body and its connection closed (`_body`).

`/verify`, `/settle` and `/settle/status` serve only callers with a live API key (`Authorization: Bearer`),
or also callers without one on a public facilitator (`_door`); a refusal at the door is HTTP 401 with the
operation's body, a key's rules refuse with its reasons (or 429 past its rate), and nothing is claimed; a
client that presented too many wrong keys lately gets 429 with `Retry-After` for its next wrong one.

The app is plain Starlette: its handlers read and write bytes themselves, and FastAPI's routing layers
(dependency solving, exit stacks, telemetry) cost about a fifth of a settlement's CPU at concurrency 50.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.observability import ScrapedGauges, metrics_route, readiness_route, service_version

from ._api_keys import ApiKeyStore
from ._body import BodyTooSlowError, read_json
from ._config import FacilitatorSettings
from ._door import Caller, Door, Refused
from ._errors import IdempotencyConflictError, InvalidIdempotencyKeyError
from ._health import facilitator_checks
from ._malformed import settle_refusal, verify_refusal
from ._metrics import FacilitatorMetrics, facilitator_readings
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

logger = logging.getLogger(__name__)


def _json(
    body: dict[str, Any] | WireModel, status_code: int = 200, *, retry_after_s: int | None = None
) -> Response:
    content = body.to_json_dict() if isinstance(body, WireModel) else body
    headers = None if retry_after_s is None else {"Retry-After": str(retry_after_s)}
    return Response(
        orjson.dumps(content), status_code=status_code, media_type="application/json", headers=headers
    )


def _problem(status_code: int, error: str, message: str) -> Response:
    return _json({"error": error, "message": message}, status_code)


# The one table of the HTTP statuses of refusals that are not HTTP 200; their bodies are settle answers.
_HTTP_STATUS: dict[type[Exception], int] = {
    InvalidIdempotencyKeyError: 400,
    IdempotencyConflictError: 409,
}
# A refused idempotency key is a problem of the request, which x402 names only as its payload.
_KEY_REASON = Reason.INVALID_PAYLOAD


def _too_slow(body: dict[str, Any]) -> Response:
    """408 with the operation's answer, the connection closed: the rest of the body is never read."""
    response = _json(body, 408)
    response.headers["connection"] = "close"
    return response


async def _announce_door(door: Door) -> None:
    """Say at start, in one line, who may call /verify and /settle."""
    if door.public:
        logger.warning(
            "public facilitator (X402_FACILITATOR_PUBLIC): /verify and /settle serve callers without an "
            "API key too; keys' rules apply to those that present one"
        )
    elif not await door.store.any_live():
        logger.warning(
            "no API key yet: /verify and /settle refuse every caller; create one with "
            "`x402-facilitator keys create --name <caller>`"
        )


def create_app(
    facilitator: Facilitator | None = None, *, settings: FacilitatorSettings | None = None
) -> Starlette:
    """The HTTP app around `facilitator`, or around one opened from `settings` in the app's lifespan.

    `settings` also give the readiness floor of the relayer's balance and the address the startup line
    names (the CLI puts its `--host` / `--port` there).
    """
    if settings is None and facilitator is None:
        settings = FacilitatorSettings()
    config = settings or FacilitatorSettings.model_construct()
    registry = CollectorRegistry()
    metrics = FacilitatorMetrics(registry)
    max_body_bytes, body_timeout_s = config.facilitator_max_body_bytes, config.facilitator_body_timeout_s

    def current() -> Facilitator:
        service: Facilitator = app.state.facilitator
        return service

    registry.register(scraped := ScrapedGauges(facilitator_readings(current)))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if facilitator is not None:
            app.state.facilitator = facilitator
            app.state.door = Door(
                ApiKeyStore(facilitator.engine),
                public=config.facilitator_public,
                on_refused=metrics.door_refused,
            )
            yield
            return
        opened = await Facilitator.open(config)
        app.state.facilitator = opened
        app.state.door = door = Door(
            ApiKeyStore(opened.engine), public=config.facilitator_public, on_refused=metrics.door_refused
        )
        await _announce_door(door)
        logger.info(
            "facilitator %s serving at http://%s:%d on %s, relayer %s",
            service_version(),
            config.host,
            config.port,
            opened.network,
            opened.relayer_address,
            extra={
                "address": f"{config.host}:{config.port}",
                "version": service_version(),
                "network": opened.network,
                "relayer": opened.relayer_address,
            },
        )
        try:
            yield
        finally:
            await opened.aclose()

    async def admit(request: Request) -> tuple[Caller | Refused, object, WireError | None]:
        """The caller at the door, then the body read (so a refusal still answers in the request's x402
        version); nothing is parsed further for a caller refused."""
        door: Door = request.app.state.door
        client = request.client.host if request.client is not None else ""
        caller = await door.admit(request.headers.get("authorization"), client)
        try:
            body = await read_json(request, max_bytes=max_body_bytes, timeout_s=body_timeout_s)
            return caller, body, None
        except WireError as exc:
            return caller, None, exc

    async def verify(request: Request) -> Response:
        caller, data, unreadable = await admit(request)
        if isinstance(unreadable, BodyTooSlowError):
            return _too_slow(verify_refusal(None, unreadable.reason, unreadable.message))
        if isinstance(caller, Refused):
            body = verify_refusal(data, caller.reason, caller.message)
            return _json(body, caller.status, retry_after_s=caller.retry_after_s)
        try:
            if unreadable is not None:
                raise unreadable
            parsed = parse_verify_request(data)
            payload, requirements = request_to_v2(parsed)
        except WireError as exc:
            return _json(verify_refusal(data, exc.reason, exc.message))
        refused = request.app.state.door.check_rules(caller, requirements, settling=False)
        if refused is not None:
            return _json(verify_refusal(data, refused.reason, refused.message), refused.status)
        started = time.perf_counter()
        answer = await request.app.state.facilitator.verify(payload, requirements)
        metrics.verify_seconds.observe(time.perf_counter() - started)
        metrics.verified(answer)
        return _json(verify_response_to_v1(answer) if isinstance(parsed, VerifyRequestV1) else answer)

    async def settle(request: Request) -> Response:
        service: Facilitator = request.app.state.facilitator
        caller, data, unreadable = await admit(request)
        if isinstance(unreadable, BodyTooSlowError):
            return _too_slow(settle_refusal(None, unreadable.reason, unreadable.message, service.network))
        if isinstance(caller, Refused):
            body = settle_refusal(data, caller.reason, caller.message, service.network)
            return _json(body, caller.status, retry_after_s=caller.retry_after_s)
        try:
            if unreadable is not None:
                raise unreadable
            parsed = parse_settle_request(data)
            payload, requirements = request_to_v2(parsed)
        except WireError as exc:
            return _json(settle_refusal(data, exc.reason, exc.message, service.network))
        refused = request.app.state.door.check_rules(caller, requirements, settling=True)
        if refused is not None:
            body = settle_refusal(data, refused.reason, refused.message, service.network)
            return _json(body, refused.status)
        started = time.perf_counter()
        try:
            answer = await service.settle(
                payload,
                requirements,
                idempotency_key=request.headers.get("idempotency-key"),
                namespace=caller.namespace(payload),
            )
        except (InvalidIdempotencyKeyError, IdempotencyConflictError) as exc:
            body = settle_refusal(data, _KEY_REASON, str(exc), service.network)
            return _json(body, _HTTP_STATUS[type(exc)])
        metrics.settle_seconds.observe(time.perf_counter() - started)
        metrics.settled(answer)
        return _json(settle_response_to_v1(answer) if isinstance(parsed, SettleRequestV1) else answer)

    async def settle_status(request: Request) -> Response:
        service: Facilitator = request.app.state.facilitator
        caller, data, unreadable = await admit(request)
        if isinstance(unreadable, BodyTooSlowError):
            return _too_slow(settle_refusal(None, unreadable.reason, unreadable.message, service.network))
        if isinstance(caller, Refused):
            body = settle_refusal(data, caller.reason, caller.message, service.network)
            return _json(body, caller.status, retry_after_s=caller.retry_after_s)
        try:
            if unreadable is not None:
                raise unreadable
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

    async def supported(request: Request) -> Response:
        return _json(request.app.state.facilitator.supported())

    async def healthz(request: Request) -> Response:
        # Liveness only: whether the node, the database or the relayer are fine is /readyz's question.
        service: Facilitator = request.app.state.facilitator
        return _json({"status": "ok", "network": service.network, "relayer": service.relayer_address})

    floor = config.relayer_min_balance_wei
    routes = [
        Route("/verify", verify, methods=["POST"]),
        Route("/settle", settle, methods=["POST"]),
        Route("/settle/status", settle_status, methods=["POST"]),
        Route("/supported", supported, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        metrics_route(registry, scraped),
        readiness_route(lambda: facilitator_checks(current(), min_balance_wei=floor)),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    return app
