"""Authentication of every A2A request, before anything of it is read: HTTP (both versions) and gRPC.

On HTTP, `AuthenticationGate` (ASGI middleware on the A2A paths: JSON-RPC, HTTP+JSON, the 0.3 routes at
the root and under each tenant's root) reads `Authorization`, and puts the caller on the request scope
(`scope["user"]`, where the SDK's context builder takes it from): a `callers.Caller`, or Starlette's
`UnauthenticatedUser` when no credential was presented. A credential that authenticates nobody is answered
HTTP 401 with `WWW-Authenticate: Bearer error="invalid_token"` and never reaches a handler. The cards and
`/healthz` are public and not looked at.

On gRPC, the route interceptor calls `authenticate_grpc` with the call's `authorization` metadata; a refused
credential ends the call UNAUTHENTICATED. The refusal reads the same for every reason (unknown, revoked,
expired, wrong issuer or audience), and the credential appears in no answer and no log.

A client network that presented too many refused credentials lately (`CredentialThrottled`, counted by the
authenticator for every binding together) gets HTTP 429 with `Retry-After`, or RESOURCE_EXHAUSTED with a
`retry-after` trailer on gRPC, for its next wrong one; a right one is still accepted.
"""

from __future__ import annotations

import json

from starlette.authentication import UnauthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_x402.merchant.callers import Authenticator, Caller, CredentialRefused, CredentialThrottled

from .paths import is_a2a_path

__all__ = ["REFUSED_MESSAGE", "WWW_AUTHENTICATE", "AuthenticationGate", "authenticate_grpc"]

REFUSED_MESSAGE = "the credential presented is not valid"
"""What a refused credential is told, whatever the reason."""
WWW_AUTHENTICATE = 'Bearer realm="a2a", error="invalid_token"'
"""The challenge of a 401 (RFC 6750 §3)."""


class AuthenticationGate:
    """ASGI middleware authenticating the A2A paths' requests with `authenticator` (see the module)."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self._app = app
        self._authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate an A2A request, then pass it on; answer 401 to a refused credential."""
        if scope["type"] != "http" or not is_a2a_path(scope["path"]):
            await self._app(scope, receive, send)
            return
        # latin-1 decodes any bytes; the authenticator refuses a value that is not ASCII.
        values = [value.decode("latin-1") for name, value in scope["headers"] if name == b"authorization"]
        client = scope.get("client")
        try:
            caller = await self._authenticator.authenticate_request(
                values, address=client[0] if client else ""
            )
        except CredentialThrottled as exc:
            await _refuse(send, 429, "RESOURCE_EXHAUSTED", str(exc), (b"retry-after", str(exc.retry_after_s)))
            return
        except CredentialRefused:
            await _refuse(
                send, 401, "UNAUTHENTICATED", REFUSED_MESSAGE, (b"www-authenticate", WWW_AUTHENTICATE)
            )
            return
        scope["user"] = caller if caller is not None else UnauthenticatedUser()
        await self._app(scope, receive, send)


async def authenticate_grpc(authenticator: Authenticator, values: list[str], peer: str) -> Caller | None:
    """The caller of a gRPC call whose `authorization` metadata is `values`, from the client address
    `peer`; None when anonymous.

    Raises:
        CredentialThrottled: refused, and `peer` presented too many refused credentials lately.
        CredentialRefused: the credential authenticates nobody, or more than one was sent.
    """
    return await authenticator.authenticate_request(values, address=peer)


async def _refuse(send: Send, status: int, name: str, message: str, header: tuple[bytes, str]) -> None:
    body = json.dumps({"error": {"code": status, "status": name, "message": message}})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (header[0], header[1].encode()),
                (b"cache-control", b"no-store"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})
