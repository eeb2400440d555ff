"""The merchant edge's URL layout: every path the app serves, in one place.

- `GET /.well-known/agent-card.json`: the public Agent Card (A2A §8.2).
- `POST /a2a/jsonrpc`: the JSON-RPC binding for every tenant; the tenant is `params.tenant`.
- `/a2a/rest/...`: the HTTP+JSON binding for the default tenant: `POST message:send`, `POST message:stream`,
  `GET tasks`, `GET tasks/{id}`, `POST tasks/{id}:cancel`, `GET|POST tasks/{id}:subscribe`.
- `/a2a/rest/{tenant}/...`: the same routes for a named tenant.
- A2A 0.3 for the default tenant (when there is one): the 0.3 JSON-RPC methods (`message/send`, ...) on
  `POST /a2a/jsonrpc`, and the 0.3 HTTP+JSON routes under `/a2a/rest/v1/...` (`v1` is a reserved tenant id).
- A2A 0.3 for a named tenant: the same layout again under `/t/{tenant}` (`TENANT_ROOT_PATH`): its 0.3 card
  at `/t/{tenant}/.well-known/agent-card.json`, 0.3 JSON-RPC at `POST /t/{tenant}/a2a/jsonrpc`, 0.3
  HTTP+JSON under `/t/{tenant}/a2a/rest/v1/...`. A 0.3 request has no `tenant` field, so there the URL
  is the routing key; a 0.3 client given `https://shop.example/t/acme` as the agent's URL finds everything
  where it finds it at the root. Only 0.3 is served there: 1.0 clients name the tenant in the request.
- `GET /healthz`: liveness.

Which version a request is served in is negotiated per request (`versions`), never inferred from the URL;
a route refuses a request of the other version.

The tenant form of HTTP+JSON is "interface URL + `/{tenant}` + operation path", which is what the A2A proto's
`additional_bindings` describe and what the a2a-sdk client sends for an interface carrying a `tenant`.
Everything A2A lives under `/a2a` (at the root or a tenant's root), so routes the app adds elsewhere
(`/.well-known/jwks.json`, `/tenants/{tenant}/...`) never compete with the tenant path parameter.
"""

from __future__ import annotations

import re

from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

__all__ = [
    "A2A_PATH_PREFIX",
    "AGENT_CARD_PATH",
    "HEALTH_PATH",
    "JSONRPC_PATH",
    "REST_PATH",
    "TENANT_ROOT_PATH",
    "is_a2a_path",
    "tenant_root",
]

AGENT_CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
A2A_PATH_PREFIX = "/a2a/"
JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
HEALTH_PATH = "/healthz"
TENANT_ROOT_PATH = "/t/{tenant}"
"""The root of a named tenant's A2A 0.3 layout (a Starlette path with the `tenant` parameter)."""

_TENANT_A2A_PREFIX = re.compile(r"/t/[^/]+" + re.escape(A2A_PATH_PREFIX))


def tenant_root(tenant: str) -> str:
    """The path of `tenant`'s root (`TENANT_ROOT_PATH` for that tenant id)."""
    return TENANT_ROOT_PATH.format(tenant=tenant)


def is_a2a_path(path: str) -> bool:
    """Whether `path` is under `/a2a/`, at the root or a tenant's root (the card is not: it is outside)."""
    return path.startswith(A2A_PATH_PREFIX) or _TENANT_A2A_PREFIX.match(path) is not None
