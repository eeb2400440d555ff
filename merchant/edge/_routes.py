"""The A2A routes, built by the SDK's route factories and adjusted where the SDK falls short.

Tenant mount. `create_rest_routes(path_prefix=REST_PATH)` returns the prefixed routes plus
`Mount('/{tenant}', ...)` holding the same routes, i.e. the tenant form `/{tenant}/a2a/rest/...`. That is
wrong twice over: the A2A proto and the SDK's own client put the tenant after the interface URL
(`/a2a/rest/{tenant}/...`), and a catch-all mount at the root shadows every route registered after it. The
mount is replaced by one at `REST_PATH/{tenant}` carrying the same endpoints; the SDK's dispatcher reads
the tenant from the path parameter either way.

ListTasks body. The SDK serializes ListTasks with `always_print_fields_with_no_presence`, which is needed
for the response's own REQUIRED fields (`nextPageToken` is "" on the last page) but also prints every
default inside the tasks (`"filename": ""`, `"extensions": []`, ...), so a task listed differs from the
same task fetched. Both bindings' ListTasks results are re-serialized as plain ProtoJSON with the four
REQUIRED top-level fields kept.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.request_handlers import RequestHandler
from a2a.server.routes import ServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.types import ListTasksResponse
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from .paths import JSONRPC_PATH, REST_PATH

__all__ = ["jsonrpc_routes", "rest_routes"]

Endpoint = Callable[[Request], Awaitable[Response]]

_SDK_TENANT_MOUNT = "/{tenant}"
_LIST_TASKS_PATH = "/tasks"
_LIST_TASKS_METHOD = "ListTasks"


def jsonrpc_routes(handler: RequestHandler, context_builder: ServerCallContextBuilder) -> list[BaseRoute]:
    """The JSON-RPC endpoint at `JSONRPC_PATH`; the tenant travels in `params.tenant`."""
    routes: list[BaseRoute] = []
    for route in create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH, context_builder=context_builder):
        routes.append(Route(route.path, _jsonrpc_list_tasks_canonical(route.endpoint), methods=route.methods))
    return routes


def rest_routes(handler: RequestHandler, context_builder: ServerCallContextBuilder) -> list[BaseRoute]:
    """The HTTP+JSON routes under `REST_PATH`, and their tenant form under `REST_PATH/{tenant}`."""
    routes: list[Route] = []
    for route in create_rest_routes(handler, context_builder=context_builder, path_prefix=REST_PATH):
        if isinstance(route, Route):
            endpoint = route.endpoint
            if route.path == REST_PATH + _LIST_TASKS_PATH:
                endpoint = _rest_list_tasks_canonical(endpoint)
            routes.append(Route(route.path, endpoint, methods=route.methods))
        elif not (isinstance(route, Mount) and route.path == _SDK_TENANT_MOUNT):
            # A new kind of route from a newer SDK must be looked at, not silently served or dropped.
            raise RuntimeError(f"unexpected route from a2a-sdk create_rest_routes: {route!r}")
    tenant_routes = [
        Route(route.path.removeprefix(REST_PATH), endpoint=route.endpoint, methods=route.methods)
        for route in routes
    ]
    return [*routes, Mount(f"{REST_PATH}/{{tenant}}", routes=tenant_routes)]


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


def _jsonrpc_list_tasks_canonical(endpoint: Endpoint) -> Endpoint:
    async def handle(request: Request) -> Response:
        response = await endpoint(request)
        if not isinstance(response, JSONResponse):
            return response  # a stream
        body = json.loads(bytes(response.body))
        # The dispatcher has parsed the request body already; Starlette hands back the cached JSON.
        if "result" not in body or (await request.json()).get("method") != _LIST_TASKS_METHOD:
            return response
        body["result"] = _canonical_list_tasks(body["result"])
        return JSONResponse(body, status_code=response.status_code)

    return handle
