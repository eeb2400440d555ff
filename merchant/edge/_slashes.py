"""A2A paths with a trailing slash are served as the same path without it.

Clients build operation URLs by joining the interface URL from the card with a path, and some joins leave a
slash at the end (httpx's `base_url` posts to `…/a2a/jsonrpc/` for an empty path; the A2A 1.0 TCK does
exactly that). Starlette's router would answer such a request with a 307 redirect, which a client that
does not follow redirects reports as a failure and one that follows may resend without the POST body. Under
`prefix` the path is therefore served as if written without its trailing slashes, before any routing.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["TrailingSlashMiddleware"]


class TrailingSlashMiddleware:
    """ASGI middleware serving `<prefix>…/` as `<prefix>…` (the prefix itself is left as it is)."""

    def __init__(self, app: ASGIApp, *, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and path.startswith(self.prefix) and path.endswith("/"):
            trimmed = path.rstrip("/")
            if trimmed.startswith(self.prefix):
                raw: bytes = scope.get("raw_path") or path.encode()
                scope = {**scope, "path": trimmed, "raw_path": raw.rstrip(b"/")}
        await self.app(scope, receive, send)
