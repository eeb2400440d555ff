"""The A2A routes of every binding and version, built by the SDK's route factories and guarded here.

Versions. Each route serves one protocol version: the 1.0 JSON-RPC methods (`SendMessage`, ...) and
HTTP+JSON paths, and — when the deployment serves 0.3 — the SDK's 0.3 compatibility layer: the 0.3 methods
(`message/send`, ...) on the same JSON-RPC URL and the 0.3 HTTP+JSON paths under `REST_PATH/v1`. Before a
request reaches the SDK, its route negotiates the version (`VersionNegotiator`) and refuses, with
VersionNotSupported in the binding's error form, a version it cannot negotiate or an operation of the
other version (a 1.0 client calling `message/send`, a header-less — hence 0.3 — client calling
`SendMessage`). The SDK would otherwise answer the former with a 0.3 InternalError. A SendMessage whose
message is written in the other version's form is refused with InvalidParams (`_forms`), and so is a 0.3
request whose `params` alone break the 0.3 schema (the SDK would answer InvalidRequest). A 0.3 HTTP+JSON
`message:send` naming no configuration is non-blocking, as the 0.3 proto reads it, and a 0.3 `GET` may
name its query parameters by their proto names (`_v0_3_rest`). Every response served in a version
carries `A2A-Version` and the activated extensions (`_echo`).

Tenant mount. `create_rest_routes(path_prefix=REST_PATH)` returns the prefixed routes plus
`Mount('/{tenant}', ...)` holding the same routes, i.e. the tenant form `/{tenant}/a2a/rest/...`. That is
wrong twice over: the A2A proto and the SDK's own client put the tenant after the interface URL
(`/a2a/rest/{tenant}/...`), and a catch-all mount at the root shadows every route registered after it. The
mount is replaced by one at `REST_PATH/{tenant}` carrying the same 1.0 endpoints; the SDK's dispatcher reads
the tenant from the path parameter either way. The 0.3 routes come first: `v1` is a reserved tenant id.

Tenant roots. A named tenant's 0.3 routes (`tenant_v0_3_routes`) are the same guarded 0.3 endpoints, mounted
under `paths.TENANT_ROOT_PATH`; they refuse A2A 1.0 with VersionNotSupported, since 1.0 requests name
their tenant themselves at the root URLs. Their tenant is the URL's, put on the call context by the context
builder and kept there by the tenant gate (`_tenancy`).

Errors are written in each binding's and version's form by `_error_forms`. The SDK's 0.3 HTTP+JSON
streams raise an error of their first step (an unknown task, a refused message) inside the body, after
the 200 has gone out, so the client sees the connection drop; their first event is produced before the
response starts, and such an error is answered as an error.
ListTasks: the SDK serializes it with `always_print_fields_with_no_presence`, which is needed for the
response's own REQUIRED fields (`nextPageToken` is "" on the last page) but also prints every default inside
the tasks (`"filename": ""`, `"extensions": []`, ...), so a task listed differs from the same task fetched.
Both bindings' ListTasks results are re-serialized as plain ProtoJSON with the four REQUIRED fields kept.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from a2a.server.jsonrpc_models import JSONParseError as JSONRPCParseError
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import ServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import ListTasksResponse
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidRequestError,
    VersionNotSupportedError,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from ._echo import ProtocolEcho
from ._error_forms import (
    INTERNAL_MESSAGE,
    finish_v0_3_error,
    rest_error,
    rest_typed,
    rest_with_error_info,
    v0_3_error,
    with_error_info,
)
from ._failures import failure_of
from ._forms import check_jsonrpc_v0_3_form, check_jsonrpc_v0_3_params, check_rest_v0_3_form, check_v1_0_form
from ._v0_3_rest import REST_V0_3_SEND_SUFFIX, with_v0_3_rest_query_names, with_v0_3_rest_send_default
from .paths import JSONRPC_PATH, REST_PATH
from .versions import ProtocolVersion, VersionNegotiator

__all__ = ["jsonrpc_routes", "rest_routes", "tenant_v0_3_routes"]

Endpoint = Callable[[Request], Awaitable[Response]]
FormCheck = Callable[[Any], None]

_SDK_TENANT_MOUNT = "/{tenant}"
_REST_V0_3_PREFIX = REST_PATH + "/v1/"
_LIST_TASKS_PATH = "/tasks"
_LIST_TASKS_METHOD = "ListTasks"
_METHODS = {
    **dict.fromkeys(JsonRpcDispatcher.METHOD_TO_MODEL, ProtocolVersion.V1_0),
    **dict.fromkeys(JSONRPC03Adapter.METHOD_TO_MODEL, ProtocolVersion.V0_3),
}
_SEND_FORMS: dict[str, FormCheck] = {
    "SendMessage": check_v1_0_form,
    "SendStreamingMessage": check_v1_0_form,
    "message/send": check_jsonrpc_v0_3_form,
    "message/stream": check_jsonrpc_v0_3_form,
}
_REST_SEND_PATHS = ("/message:send", "/message:stream")


def _other_version(operation: str, version: ProtocolVersion) -> VersionNotSupportedError:
    if version is ProtocolVersion.V1_0:
        hint = "the request asks for A2A 1.0; send A2A-Version: 0.3 to use it"
        belongs = "0.3"
    else:
        hint = (
            "the request asks for A2A 0.3 (an empty or missing A2A-Version means 0.3); send A2A-Version: 1.0"
        )
        belongs = "1.0"
    return VersionNotSupportedError(
        message=f"{operation} is an A2A {belongs} operation, but {hint}",
        data={"requested": version.value, "supported": belongs},
    )


async def _json_body(request: Request) -> Any:
    """The request's JSON body, or None when it has none.

    Parsed as strict JSON (RFC 8259): UTF-8, and no NaN, Infinity or numbers beyond a double. Python's own
    parser accepts those, and protobuf then fails to write them back out, deep inside the SDK.

    Raises:
        InvalidRequestError: the body is not strict JSON (the JSON-RPC route answers it as a parse error).
    """
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(message=f"the request body is not valid JSON: {exc}") from None


# -- JSON-RPC -------------------------------------------------------------------------------------------


def jsonrpc_routes(
    handler: RequestHandler,
    context_builder: ServerCallContextBuilder,
    negotiator: VersionNegotiator,
    echo: ProtocolEcho,
    *,
    serves: tuple[ProtocolVersion, ...] | None = None,
) -> list[BaseRoute]:
    """The JSON-RPC endpoint at `JSONRPC_PATH` for the versions in `serves` (default: every version the
    negotiator serves); the tenant is `params.tenant`, or on a tenant's root the URL's."""
    serving = negotiator.supported if serves is None else serves
    compat = ProtocolVersion.V0_3 in serving
    routes: list[BaseRoute] = []
    for route in create_jsonrpc_routes(
        handler, rpc_url=JSONRPC_PATH, context_builder=context_builder, enable_v0_3_compat=compat
    ):
        endpoint = _jsonrpc_endpoint(route.endpoint, negotiator, echo, serving)
        routes.append(Route(route.path, endpoint, methods=route.methods))
    return routes


def _not_served_here(version: ProtocolVersion) -> VersionNotSupportedError:
    """A request in `version` to a tenant's root, which serves only A2A 0.3 (`paths`)."""
    return VersionNotSupportedError(
        message=(
            f"the request asks for A2A {version.value}, but a tenant's own URLs serve A2A 0.3 only; "
            "A2A 1.0 clients name the tenant in the request at the agent's root URLs"
        ),
        data={"requested": version.value, "supported": ProtocolVersion.V0_3.value},
    )


def _jsonrpc_endpoint(
    endpoint: Endpoint, negotiator: VersionNegotiator, echo: ProtocolEcho, serves: tuple[ProtocolVersion, ...]
) -> Endpoint:
    async def handle(request: Request) -> Response:
        unparsable: InvalidRequestError | None = None
        try:
            body = await _json_body(request)
        except InvalidRequestError as exc:
            body, unparsable = None, exc
        envelope = body if isinstance(body, dict) else {}
        request_id = envelope.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            request_id = None
        method = envelope.get("method")
        try:
            version = negotiator.version_of(request)
        except VersionNotSupportedError as exc:
            return JSONResponse(build_error_response(request_id, exc))
        if version not in serves:
            return JSONResponse(build_error_response(request_id, _not_served_here(version)))
        belongs = _METHODS.get(method) if isinstance(method, str) else None
        if belongs is not None and belongs is not version:
            return JSONResponse(build_error_response(request_id, _other_version(f"{method!r}", version)))
        try:
            if isinstance(method, str) and belongs is ProtocolVersion.V0_3:
                check_jsonrpc_v0_3_params(JSONRPC03Adapter.METHOD_TO_MODEL[method], envelope)
            if isinstance(method, str) and method in _SEND_FORMS:
                _SEND_FORMS[method](envelope.get("params"))
        except A2AError as exc:
            if version is ProtocolVersion.V0_3:
                answer = JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": v0_3_error(exc)})
            else:
                answer = JSONResponse(build_error_response(request_id, exc))
            return echo.stamp(answer, request, version)
        response: Response
        if unparsable is not None:
            response = JSONResponse(build_error_response(None, JSONRPCParseError(message=unparsable.message)))
        else:
            response = await endpoint(request)
        if version is ProtocolVersion.V1_0 and isinstance(response, JSONResponse):
            response = _finish_v1_0(response, method)
        elif version is ProtocolVersion.V0_3 and isinstance(response, JSONResponse):
            response = _finish_v0_3(response, request)
        elif version is ProtocolVersion.V0_3 and isinstance(response, EventSourceResponse):
            response.body_iterator = _finish_v0_3_events(response.body_iterator, request)
        return echo.stamp(response, request, version)

    return handle


def _finish_v1_0(response: JSONResponse, method: Any) -> JSONResponse:
    """A 1.0 JSON-RPC answer with ErrorInfo on every error and ListTasks as plain ProtoJSON."""
    body = json.loads(bytes(response.body))
    if not isinstance(body, dict):
        return response
    error = body.get("error")
    if isinstance(error, dict):
        body["error"] = with_error_info(error)
    elif "result" in body and method == _LIST_TASKS_METHOD:
        body["result"] = _canonical_list_tasks(body["result"])
    else:
        return response
    return JSONResponse(body, status_code=response.status_code)


def _finish_v0_3(response: JSONResponse, request: Request) -> JSONResponse:
    """A 0.3 JSON-RPC answer with its error in the 0.3 form (see the module)."""
    body = json.loads(bytes(response.body))
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return response
    body["error"] = finish_v0_3_error(error, failure_of(request))
    return JSONResponse(body, status_code=response.status_code)


async def _finish_v0_3_events(events: AsyncIterable[Any], request: Request) -> AsyncIterator[Any]:
    """The SSE events of a 0.3 JSON-RPC stream, an error event in the 0.3 form."""
    try:
        async for event in events:
            data = event.get("data") if isinstance(event, dict) else None
            body = orjson.loads(data) if isinstance(data, str) else None
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(body, dict) and isinstance(error, dict):
                body["error"] = finish_v0_3_error(error, failure_of(request))
                event = {**event, "data": orjson.dumps(body).decode()}
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


# -- HTTP+JSON ------------------------------------------------------------------------------------------


def rest_routes(
    handler: RequestHandler,
    context_builder: ServerCallContextBuilder,
    negotiator: VersionNegotiator,
    echo: ProtocolEcho,
) -> list[BaseRoute]:
    """The HTTP+JSON routes: 1.0 under `REST_PATH` and `REST_PATH/{tenant}`, 0.3 under `REST_PATH/v1`."""
    legacy, current = _guarded_rest_routes(
        handler, context_builder, negotiator, echo, compat=ProtocolVersion.V0_3 in negotiator.supported
    )
    tenant_routes = [
        Route(route.path.removeprefix(REST_PATH), endpoint=route.endpoint, methods=route.methods)
        for route in current
    ]
    return [*legacy, *current, Mount(f"{REST_PATH}/{{tenant}}", routes=tenant_routes)]


def tenant_v0_3_routes(
    handler: RequestHandler,
    context_builder: ServerCallContextBuilder,
    negotiator: VersionNegotiator,
    echo: ProtocolEcho,
) -> list[BaseRoute]:
    """The A2A 0.3 routes of a tenant's root (`paths.TENANT_ROOT_PATH`, where they are mounted): JSON-RPC at
    `JSONRPC_PATH` and HTTP+JSON under `REST_PATH/v1`, refusing A2A 1.0 requests with VersionNotSupported.

    `context_builder` must take the tenant from the URL (`EdgeCallContextBuilder(tenant_from_path=True)`).
    """
    rpc = jsonrpc_routes(handler, context_builder, negotiator, echo, serves=(ProtocolVersion.V0_3,))
    legacy, _ = _guarded_rest_routes(handler, context_builder, negotiator, echo, compat=True, only_v0_3=True)
    return [*rpc, *legacy]


def _guarded_rest_routes(
    handler: RequestHandler,
    context_builder: ServerCallContextBuilder,
    negotiator: VersionNegotiator,
    echo: ProtocolEcho,
    *,
    compat: bool,
    only_v0_3: bool = False,
) -> tuple[list[Route], list[Route]]:
    """The SDK's HTTP+JSON routes under `REST_PATH`, guarded: (the 0.3 ones, the 1.0 ones)."""
    legacy: list[Route] = []
    current: list[Route] = []
    for route in create_rest_routes(
        handler, context_builder=context_builder, enable_v0_3_compat=compat, path_prefix=REST_PATH
    ):
        if isinstance(route, Route):
            legacy_route = route.path.startswith(_REST_V0_3_PREFIX)
            version = ProtocolVersion.V0_3 if legacy_route else ProtocolVersion.V1_0
            endpoint = route.endpoint
            if route.path == REST_PATH + _LIST_TASKS_PATH:
                endpoint = _rest_list_tasks_canonical(endpoint)
            if only_v0_3 and version is not ProtocolVersion.V0_3:
                continue
            guarded = _rest_endpoint(endpoint, version, _rest_form(route.path, version), negotiator, echo)
            (legacy if version is ProtocolVersion.V0_3 else current).append(
                Route(route.path, guarded, methods=route.methods)
            )
        elif not (isinstance(route, Mount) and route.path == _SDK_TENANT_MOUNT):
            # A new kind of route from a newer SDK must be looked at, not silently served or dropped.
            raise RuntimeError(f"unexpected route from a2a-sdk create_rest_routes: {route!r}")
    return legacy, current


def _rest_form(path: str, version: ProtocolVersion) -> FormCheck | None:
    if not path.endswith(_REST_SEND_PATHS):
        return None
    return check_rest_v0_3_form if version is ProtocolVersion.V0_3 else check_v1_0_form


def _rest_endpoint(
    endpoint: Endpoint,
    serves: ProtocolVersion,
    form_check: FormCheck | None,
    negotiator: VersionNegotiator,
    echo: ProtocolEcho,
) -> Endpoint:
    async def handle(request: Request) -> Response:
        try:
            version = negotiator.version_of(request)
        except VersionNotSupportedError as exc:
            return rest_error(exc)
        if version is not serves:
            return rest_error(_other_version(f"{request.method} {request.url.path}", version))
        if version is ProtocolVersion.V0_3 and request.method == "GET":
            request = with_v0_3_rest_query_names(request)
        if request.method == "POST":
            try:
                body = await _json_body(request)
                if form_check is not None:
                    form_check(body)
            except A2AError as exc:
                return echo.stamp(rest_typed(rest_error(exc), version), request, version)
            if version is ProtocolVersion.V0_3 and request.url.path.endswith(REST_V0_3_SEND_SUFFIX):
                request = with_v0_3_rest_send_default(request, body)
        response = await endpoint(request)
        if version is ProtocolVersion.V0_3 and isinstance(response, EventSourceResponse):
            response = await _rest_stream_started(response)
        response = rest_with_error_info(response)
        return echo.stamp(rest_typed(response, version), request, version)

    return handle


async def _rest_stream_started(response: EventSourceResponse) -> Response:
    """`response` with its first event produced, or the error its first step raised (see the module)."""
    events = aiter(response.body_iterator)
    try:
        first = await anext(events)
    except StopAsyncIteration:
        return response
    except A2AError as exc:
        return rest_error(exc)
    except Exception:  # noqa: BLE001 - the SDK has logged it; its text is not for the client
        return rest_error(InternalError(message=INTERNAL_MESSAGE))
    response.body_iterator = _prepended(first, events)
    return response


async def _prepended(first: Any, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    try:
        yield first
        async for event in events:
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


def _canonical_list_tasks(result: dict[str, Any]) -> dict[str, Any]:
    canonical = MessageToDict(ParseDict(result, ListTasksResponse()))
    # These ListTasksResponse fields are REQUIRED, so they appear even when they hold their default.
    return {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0, **canonical}


def _rest_list_tasks_canonical(endpoint: Endpoint) -> Endpoint:
    async def list_tasks(request: Request) -> Response:
        response = await endpoint(request)
        if response.status_code != 200:
            return response
        result = json.loads(bytes(response.body))
        return JSONResponse(_canonical_list_tasks(result), media_type=response.media_type)

    return list_tasks
