"""The merchant edge's URL layout: every path the app serves, in one place.

- `GET /.well-known/agent-card.json`: the public Agent Card (A2A §8.2).
- `POST /a2a/jsonrpc`: the JSON-RPC binding for every tenant; the tenant is `params.tenant`.
- `/a2a/rest/...`: the HTTP+JSON binding for the default tenant: `POST message:send`, `POST message:stream`,
  `GET tasks`, `GET tasks/{id}`, `POST tasks/{id}:cancel`, `GET|POST tasks/{id}:subscribe`.
- `/a2a/rest/{tenant}/...`: the same routes for a named tenant.
- A2A 0.3 (default tenant only, when there is one): the 0.3 JSON-RPC methods (`message/send`, ...) on
  `POST /a2a/jsonrpc`, and the 0.3 HTTP+JSON routes under `/a2a/rest/v1/...` (`v1` is a reserved tenant id).
- `GET /healthz`: liveness.

Which version a request is served in is negotiated per request (`versions`), never inferred from the URL;
a route refuses a request of the other version.

The tenant form of HTTP+JSON is "interface URL + `/{tenant}` + operation path", which is what the A2A proto's
`additional_bindings` describe and what the a2a-sdk client sends for an interface carrying a `tenant`.
Everything A2A lives under `/a2a`, so routes the app adds elsewhere (`/.well-known/jwks.json`,
`/tenants/{tenant}/...`) never compete with the tenant path parameter.
"""

from __future__ import annotations

from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

__all__ = ["A2A_PATH_PREFIX", "AGENT_CARD_PATH", "HEALTH_PATH", "JSONRPC_PATH", "REST_PATH"]

AGENT_CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
A2A_PATH_PREFIX = "/a2a/"
JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
HEALTH_PATH = "/healthz"
