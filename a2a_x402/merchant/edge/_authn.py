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
"""

from __future__ import annotations

import json

from starlette.authentication import UnauthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_x402.merchant.callers import Authenticator, Caller, CredentialRefused

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
        values = [value for name, value in scope["headers"] if name == b"authorization"]
        try:
            caller = await self._authenticate(values)
        except CredentialRefused:
            await _refuse(send)
            return
        scope["user"] = caller if caller is not None else UnauthenticatedUser()
        await self._app(scope, receive, send)

    async def _authenticate(self, values: list[bytes]) -> Caller | None:
        if not values:
            return None
        if len(values) > 1:
            raise CredentialRefused("more than one Authorization header")
        try:
            header = values[0].decode("ascii")
        except UnicodeDecodeError:
            raise CredentialRefused("the Authorization header is not ASCII") from None
        return await self._authenticator.authenticate(header)


async def authenticate_grpc(authenticator: Authenticator, values: list[str]) -> Caller | None:
    """The caller of a gRPC call whose `authorization` metadata is `values`; None when anonymous.

    Raises:
        CredentialRefused: the credential authenticates nobody, or more than one was sent.
    """
    if not values:
        return None
    if len(values) > 1:
        raise CredentialRefused("more than one authorization metadata value")
    return await authenticator.authenticate(values[0])


async def _refuse(send: Send) -> None:
    body = json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": REFUSED_MESSAGE}})
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", WWW_AUTHENTICATE.encode()),
                (b"cache-control", b"no-store"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})
