"""A2A paths with a trailing slash are served as the same path without it.

Clients build operation URLs by joining the interface URL from the card with a path, and some joins leave a
slash at the end (httpx's `base_url` posts to `…/a2a/jsonrpc/` for an empty path; the A2A 1.0 TCK does
exactly that). Starlette's router would answer such a request with a 307 redirect, which a client that
does not follow redirects reports as a failure and one that follows may resend without the POST body. A path
that `applies` to once written without its trailing slashes is therefore served that way, before any routing.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["TrailingSlashMiddleware"]


class TrailingSlashMiddleware:
    """ASGI middleware serving `…/` as `…` when `applies` to the trimmed path (`/a2a/` is not)."""

    def __init__(self, app: ASGIApp, *, applies: Callable[[str], bool]) -> None:
        self.app = app
        self.applies = applies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and path.endswith("/"):
            trimmed = path.rstrip("/")
            if self.applies(trimmed):
                raw: bytes = scope.get("raw_path") or path.encode()
                scope = {**scope, "path": trimmed, "raw_path": raw.rstrip(b"/")}
        await self.app(scope, receive, send)
