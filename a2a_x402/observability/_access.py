"""The access log (`X402_ACCESS_LOG`): one INFO line per HTTP request, at the outermost layer of an app.

Only the method, the path (never the query string, which may carry what a caller did not mean to log),
the status and the duration are logged; headers and bodies (tokens, payments) never are.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["AccessLogMiddleware"]

logger = logging.getLogger("x402.access")


class AccessLogMiddleware:
    """Wraps an ASGI app and logs each HTTP request it answers (lifespan and websockets pass through)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request through the wrapped app and log it when it is answered (or fails)."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client sees when the app raises before answering

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, send_and_note)
        finally:
            duration_ms = round((time.perf_counter() - started) * 1000, 1)
            client = scope.get("client")
            logger.info(
                "%s %s %d %.1f ms",
                scope["method"],
                scope["path"],
                status,
                duration_ms,
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "duration_ms": duration_ms,
                    "client": f"{client[0]}:{client[1]}" if client else None,
                },
            )
