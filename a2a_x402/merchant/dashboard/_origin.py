"""Whether a state-changing request (log-in, log-out) comes from another site: cross-site request forgery.

A browser says where a request comes from: `Sec-Fetch-Site` (every current browser), `Origin` on every
POST, `Referer` (the pages' policy is `same-origin`, so it is sent to this origin only). A request is
cross-site if any of them names another site or origin (`Origin: null`, from a sandboxed or privacy-
stripped context, included). A request with none of them is not a browser's (a script's, which CSRF
cannot be; it must hold the token anyway). This origin is the request's own (`scheme://host` it was sent
to) or the merchant's public URL's.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

__all__ = ["is_cross_site", "origin_of"]

_SAME = frozenset({"same-origin", "none"})  # "none": the user's own navigation (typed, bookmarked)


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of `url`, lower-cased; empty for a URL with no scheme or host."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return ""
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}".lower()


def is_cross_site(request: Request, public_origin: str | None = None) -> bool:
    """Whether `request` carries a browser's sign of coming from another site or origin."""
    own = {origin_of(str(request.base_url))} | ({public_origin.lower()} if public_origin else set())
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in _SAME:
        return True
    origin = request.headers.get("origin")
    if origin is not None:
        return origin_of(origin) not in own
    referer = request.headers.get("referer")
    return referer is not None and origin_of(referer) not in own
