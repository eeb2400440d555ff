"""The A2A routes, built by the SDK's route factories and re-rooted where the SDK's layout falls short.

`create_rest_routes(path_prefix=REST_PATH)` returns the prefixed routes plus `Mount('/{tenant}', ...)`
holding the same routes, i.e. the tenant form `/{tenant}/a2a/rest/...`. That is wrong twice over: the A2A
proto and the SDK's own client put the tenant after the interface URL (`/a2a/rest/{tenant}/...`), and a
catch-all mount at the root shadows every route registered after it. The mount is therefore replaced by
one at `REST_PATH/{tenant}` carrying the same endpoints; the SDK's dispatcher reads the tenant from the
path parameter either way.
"""

from __future__ import annotations

from a2a.server.request_handlers import RequestHandler
from a2a.server.routes import ServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from starlette.routing import BaseRoute, Mount, Route

from .paths import JSONRPC_PATH, REST_PATH

__all__ = ["jsonrpc_routes", "rest_routes"]

_SDK_TENANT_MOUNT = "/{tenant}"


def jsonrpc_routes(handler: RequestHandler, context_builder: ServerCallContextBuilder) -> list[BaseRoute]:
    """The JSON-RPC endpoint at `JSONRPC_PATH`; the tenant travels in `params.tenant`."""
    return list(create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH, context_builder=context_builder))


def rest_routes(handler: RequestHandler, context_builder: ServerCallContextBuilder) -> list[BaseRoute]:
    """The HTTP+JSON routes under `REST_PATH`, and their tenant form under `REST_PATH/{tenant}`."""
    routes: list[Route] = []
    for route in create_rest_routes(handler, context_builder=context_builder, path_prefix=REST_PATH):
        if isinstance(route, Route):
            routes.append(route)
        elif not (isinstance(route, Mount) and route.path == _SDK_TENANT_MOUNT):
            # A new kind of route from a newer SDK must be looked at, not silently served or dropped.
            raise RuntimeError(f"unexpected route from a2a-sdk create_rest_routes: {route!r}")
    tenant_routes = [
        Route(route.path.removeprefix(REST_PATH), endpoint=route.endpoint, methods=route.methods)
        for route in routes
    ]
    return [*routes, Mount(f"{REST_PATH}/{{tenant}}", routes=tenant_routes)]
