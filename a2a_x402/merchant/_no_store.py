"""`Cache-Control: no-store` on every answer under the given path prefixes (the tenants' billing API and
dashboard): a tenant's data, and its errors too, are never kept by a browser or a shared cache."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["NoStoreMiddleware"]


class NoStoreMiddleware:
    """Sets `Cache-Control: no-store` on HTTP answers whose path starts with one of `prefixes`."""

    def __init__(self, app: ASGIApp, prefixes: tuple[str, ...]) -> None:
        self._app = app
        self._prefixes = prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope["path"]).startswith(self._prefixes):
            await self._app(scope, receive, send)
            return

        async def send_no_store(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["Cache-Control"] = "no-store"
            await send(message)

        await self._app(scope, receive, send_no_store)
