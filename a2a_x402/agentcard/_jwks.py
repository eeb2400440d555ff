"""Fetching and caching the JWK Sets that ``jku`` headers point to.

Usage::

    async with httpx.AsyncClient() as client:
        cache = JwksCache(client, ttl_s=300)
        key = await cache.get_key("https://shop.example/.well-known/jwks.json", kid)

Rules:

* Only ``https://`` URLs are fetched. ``http://127.0.0.1``, ``http://localhost`` and ``http://[::1]`` are
  allowed only with ``allow_insecure_localhost=True`` (development). URLs with user info are refused.
* Redirects are not followed (a redirect could move the key source to another origin).
* Every fetch has a deadline for the whole exchange (``timeout_s``), not only per read, so a server that
  drips bytes cannot hold a verification open; the body is read up to ``max_bytes`` and abandoned beyond.
* A JWK Set is cached per URL for ``ttl_s`` (300 s by default). A ``kid`` missing from a cached set causes
  one refetch (the signer may have rotated), and only once the cached set is ``min_refetch_interval_s`` old
  (30 s by default), so cards with made-up kids cannot turn the verifier into a request generator; a card
  signed only by a key newer than the cached set may therefore fail for up to that long. Fetches of one
  URL are serialised.
* Failures are never cached and stale sets are never used after their TTL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from a2a_x402.observability import unreachable_reason

from ._errors import (
    CardParseError,
    JkuNotAllowedError,
    JwksFetchError,
    JwksInvalidError,
    JwksTimeoutError,
    KeyLoadError,
    KeyNotFoundError,
)
from ._keys import VerificationKey, parse_jwks
from ._parse import load_json_object

__all__ = ["JWKS_PATH", "JwksCache", "check_jku", "fetch_key_set", "jwks_url", "origin_of"]

logger = logging.getLogger(__name__)

JWKS_PATH = "/.well-known/jwks.json"
"""Where a merchant serves its JWK Set."""

_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


def jwks_url(origin: str) -> str:
    """The JWK Set URL for a server, e.g. ``jwks_url("https://shop.example")`` -> ``https://shop.example/.well-known/jwks.json``.

    Any path, query or fragment of ``origin`` is ignored.

    Raises:
        ValueError: ``origin`` has no scheme or host.
    """
    parts = urlsplit(origin)
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"{origin!r} is not an absolute URL")
    return f"{parts.scheme}://{parts.netloc}{JWKS_PATH}"


def origin_of(url: str) -> Origin | None:
    """(scheme, host, port) of an absolute http(s) URL, or None if it is not one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname, port if port is not None else _DEFAULT_PORTS[scheme]


def check_jku(jku: str, *, allow_insecure_localhost: bool = False) -> None:
    """Raise ``JkuNotAllowedError`` unless ``jku`` is HTTPS (or, in development, plain http on localhost).

    The rule of ``JwksCache.check_url``, without a cache: a caller can tell whether development mode
    would let a refused ``jku`` through.
    """
    origin = origin_of(jku)
    if origin is None:
        raise JkuNotAllowedError(f"jku {jku!r} is not an absolute http(s) URL")
    if urlsplit(jku).username is not None:
        raise JkuNotAllowedError(f"jku {jku!r} must not carry user info")
    scheme, host, _ = origin
    if scheme == "https":
        return
    if allow_insecure_localhost and host in _LOCAL_HOSTS:
        return
    raise JkuNotAllowedError(
        f"jku {jku!r} is not HTTPS (plain http is allowed only for localhost in development)"
    )


@dataclass(frozen=True, slots=True)
class _Entry:
    keys: dict[str, VerificationKey]
    fetched_at: float


class JwksCache:
    """An async, size- and time-bounded cache of JWK Sets keyed by URL.

    Args:
        client: The ``httpx.AsyncClient`` to fetch with (owned by the caller; its transport, TLS and proxy
            settings apply).
        ttl_s: How long a fetched set is trusted.
        timeout_s: Deadline for one whole fetch (connect, headers and body).
        max_bytes: Largest JWK Set body accepted.
        min_refetch_interval_s: Minimum age of a cached set before an unknown kid triggers a refetch.
        allow_insecure_localhost: Development only: also fetch ``http://`` from 127.0.0.1, localhost, ::1.
        max_entries: Number of URLs kept; the oldest fetch is dropped first.
        clock: Monotonic seconds, injectable for tests.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        ttl_s: float = 300.0,
        timeout_s: float = 5.0,
        max_bytes: int = 64 * 1024,
        min_refetch_interval_s: float = 30.0,
        allow_insecure_localhost: bool = False,
        max_entries: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._min_refetch_interval_s = min_refetch_interval_s
        self._max_entries = max_entries
        self._clock = clock
        self.allow_insecure_localhost = allow_insecure_localhost
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def check_url(self, jku: str) -> None:
        """Raise ``JkuNotAllowedError`` unless ``jku`` may be fetched under this cache's rules."""
        check_jku(jku, allow_insecure_localhost=self.allow_insecure_localhost)

    async def get_key(self, jku: str, kid: str) -> VerificationKey:
        """Return the key ``kid`` from the JWK Set at ``jku``, fetching or refetching as the rules allow.

        Raises:
            JkuNotAllowedError: ``jku`` may not be fetched.
            JwksFetchError / JwksTimeoutError: the fetch failed.
            JwksInvalidError: the answer is not a usable JWK Set.
            KeyNotFoundError: the set (after at most one refetch) has no key ``kid``.
        """
        self.check_url(jku)
        lock = self._locks.setdefault(jku, asyncio.Lock())
        try:
            async with lock:
                entry = self._entries.get(jku)
                if entry is None or self._clock() - entry.fetched_at >= self._ttl_s:
                    entry = await self._refresh(jku)
                elif (
                    kid not in entry.keys and self._clock() - entry.fetched_at >= self._min_refetch_interval_s
                ):
                    # The signer may have rotated since the set was cached: look once more.
                    entry = await self._refresh(jku)
        finally:
            if not lock.locked():
                self._locks.pop(jku, None)
        key = entry.keys.get(kid)
        if key is None:
            raise KeyNotFoundError(f"no key {kid!r} in the JWK Set at {jku}")
        return key

    async def _refresh(self, jku: str) -> _Entry:
        self._entries.pop(jku, None)
        entry = _Entry(keys=await self._fetch(jku), fetched_at=self._clock())
        self._entries[jku] = entry
        while len(self._entries) > self._max_entries:
            oldest = min(self._entries, key=lambda url: self._entries[url].fetched_at)
            del self._entries[oldest]
        logger.info("JWK Set fetched: jku=%s keys=%d", jku, len(entry.keys))
        return entry

    async def _fetch(self, jku: str) -> dict[str, VerificationKey]:
        body = await fetch_key_set(self._client, jku, timeout_s=self._timeout_s, max_bytes=self._max_bytes)
        try:
            return parse_jwks(load_json_object(body, max_bytes=self._max_bytes, what=f"JWK Set at {jku}"))
        except (CardParseError, KeyLoadError) as exc:
            raise JwksInvalidError(f"JWK Set at {jku} is not usable: {exc}") from exc


async def fetch_key_set(client: httpx.AsyncClient, url: str, *, timeout_s: float, max_bytes: int) -> bytes:
    """The body of the JWK Set at ``url``: fetched within ``timeout_s`` for the whole exchange, no redirect
    followed, at most ``max_bytes`` (after any content-encoding is undone, so no gzip bomb gets through).

    The caller checks ``url`` first (``check_jku``) and parses what comes back.

    Raises:
        JwksTimeoutError: no whole answer within ``timeout_s``.
        JwksFetchError: the server could not be reached, or answered other than HTTP 200.
        JwksInvalidError: the answer is over ``max_bytes``.
    """
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream(
                "GET",
                url,
                headers={"Accept": "application/jwk-set+json, application/json"},
                timeout=timeout_s,
                follow_redirects=False,
            ) as response:
                if response.status_code != httpx.codes.OK:
                    raise JwksFetchError(f"{url} answered HTTP {response.status_code}")
                return await _read_bounded(response, url, max_bytes)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise JwksTimeoutError(f"{url} did not answer within {timeout_s:g} s") from exc
    except httpx.TransportError as exc:
        raise JwksFetchError(f"{url} could not be reached ({unreachable_reason(exc)})") from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # a redirect loop, a body it cannot decode
        raise JwksFetchError(f"{url} gave no usable answer: {exc}") from exc


async def _read_bounded(response: httpx.Response, url: str, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise JwksInvalidError(f"JWK Set at {url} is {declared} bytes, over the limit of {max_bytes}")
    body = bytearray()
    # aiter_bytes decodes content-encoding, so the bound applies to the inflated size (no gzip bombs).
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            raise JwksInvalidError(f"JWK Set at {url} is over the limit of {max_bytes} bytes")
    return bytes(body)
