"""The issuer keys a tenant trusts for mandates (§20.1, §20.5 step 1): its JWK Set files and `https` sources.

A tenant's `ap2.issuers` names JWK Sets of the Trusted Surfaces and agent providers whose open mandates it
takes: files, read with the tenants file (`_tenant_ap2`), and `https://` URLs, fetched here. Before a
payment's mandates are verified, `TrustedIssuers.keys_for` is asked for the `kid`s their open mandates name
(`issuer_kids`; on A2A 0.3 the one a `user_authorization` names, `token_kids`) and answers the keys trusted
now, from the files and the sources' cached sets.

Rules of the `https` sources:

* Only `https://` is fetched; plain `http://` only on loopback (127.0.0.1, localhost, ::1), as the tenants
  file's `jwt_issuers` allow it for development and tests (`agentcard.check_jku`). No user info, no
  redirect followed.
* One fetch has a deadline for the whole exchange (`timeout_s`) and reads at most `max_bytes` of body. A
  set is refused whole, as a file is, unless every key is a public EC P-256 key with a `kid` of its own: a
  private member (`d`) is a mistake of the issuer, never a key to trust.
* A set is trusted for `refresh_s` after it was fetched, then fetched again before use; while its source
  does not answer, its keys are not trusted (fail closed: a key its issuer revoked must stop counting).
* A `kid` in no set makes the sources be fetched again (the issuer may have rotated), but a source is
  fetched at most once every `min_refetch_s`, whatever the cause and whether it answered or not, so a
  stranger presenting made-up kids cannot make the merchant hammer an issuer. Fetches of one source are
  serialised; callers waiting for one use what it fetched.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from a2a_x402.agentcard import AgentCardError, JwksInvalidError, check_jku, fetch_key_set
from a2a_x402.extension import Ap2Mandates

from ._sdk import IssuerKeys

__all__ = ["IssuerSourceError", "TrustedIssuers", "check_issuer_url", "issuer_kids", "token_kids"]

logger = logging.getLogger(__name__)

_MAX_KID_CHARS = 256
_MAX_HEADER_CHARS = 4096


class IssuerSourceError(Exception):
    """An issuer source that gave no usable JWK Set: not reachable, too slow, too large, or not a set of
    public P-256 keys. The message is one line naming the URL, never the body."""


def check_issuer_url(url: str) -> None:
    """Raise `ValueError` (one line) unless `url` may be an issuer source: `https://`, or plain `http://` on
    loopback, without user info."""
    try:
        check_jku(url, allow_insecure_localhost=True)
    except AgentCardError:
        raise ValueError(
            "an issuer URL must be an absolute https:// URL without user info "
            "(plain http only on 127.0.0.1, localhost or ::1)"
        ) from None


def issuer_kids(mandates: Ap2Mandates) -> frozenset[str]:
    """The `kid`s of the issuer-signed JWTs that open the mandates (read, not verified): the keys their
    verification will ask for. A token without a readable `kid` names none (its verification refuses it)."""
    return token_kids(mandates.checkout_mandate, mandates.payment_mandate)


def token_kids(*tokens: object) -> frozenset[str]:
    """The `kid`s the first JWTs of `tokens` (SD-JWTs or JWTs, read, not verified) name in their headers:
    of the mandates of §20.4, or of a `user_authorization` (§20.7). Anything else names none."""
    kids: set[str] = set()
    for token in tokens:
        if not isinstance(token, str):
            continue
        header = token.split("~", 1)[0].split(".", 1)[0][:_MAX_HEADER_CHARS]
        try:
            decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
        except (ValueError, RecursionError):
            continue
        kid = decoded.get("kid") if isinstance(decoded, dict) else None
        if isinstance(kid, str) and 0 < len(kid) <= _MAX_KID_CHARS:
            kids.add(kid)
    return frozenset(kids)


@dataclass(frozen=True, slots=True)
class _Fetched:
    keys: Mapping[str, Mapping[str, Any]]
    at: float


class _Source:
    """One `https` JWK Set: its last good set and when it was last asked for."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fetched: _Fetched | None = None
        self.attempted_at: float | None = None
        self.lock = asyncio.Lock()


class TrustedIssuers:
    """The issuer keys one tenant trusts: those of its files (`files`, loaded) and of its `https` sources
    (`urls`, fetched with `http`, whose transport and TLS settings apply).

    Args:
        refresh_s: How long a fetched set is trusted before it is fetched again.
        min_refetch_s: The least time between two fetches of one source (an unknown kid's refetch too).
        timeout_s: The deadline of one whole fetch.
        max_bytes: The largest JWK Set body read.
        clock: Monotonic seconds, for tests.
    """

    def __init__(
        self,
        files: IssuerKeys,
        urls: Sequence[str] = (),
        http: httpx.AsyncClient | None = None,
        *,
        refresh_s: float = 300.0,
        min_refetch_s: float = 30.0,
        timeout_s: float = 5.0,
        max_bytes: int = 64 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if urls and http is None:
            raise ValueError("https issuer sources need an HTTP client")
        for url in urls:
            check_issuer_url(url)
        self._files = files
        self._sources = tuple(_Source(url) for url in dict.fromkeys(urls))
        self._http = http
        self._refresh_s = refresh_s
        self._min_refetch_s = min_refetch_s
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._clock = clock

    async def keys_for(self, kids: Collection[str]) -> IssuerKeys:
        """The keys trusted now, for verifying mandates whose issuers signed with `kids`: the files' keys
        and every source's fresh set. Unless the files hold every kid, a stale set is fetched again and,
        when a kid is in no set, every source is fetched again, each as often as the rules allow. A
        source that does not answer is logged, and its keys are left out; this never raises."""
        if set(kids) <= set(self._files.by_kid):
            return self.current()
        # The sources at once: a verification waits for the slowest fetch, not for their sum.
        stale = [source for source in self._sources if not self._fresh(source)]
        await asyncio.gather(*(self._refetch(source, lambda s: not self._fresh(s)) for source in stale))
        if not set(kids) <= set(self.current().by_kid):
            await asyncio.gather(
                *(
                    self._refetch(source, lambda s: not set(kids) <= set(self.current().by_kid))
                    for source in self._sources
                )
            )
        return self.current()

    def current(self) -> IssuerKeys:
        """The keys trusted now without fetching: the files', then each fresh source's, the first of a
        `kid` counting."""
        by_kid: dict[str, Mapping[str, Any]] = {}
        for source in reversed(self._sources):
            if source.fetched is not None and self._fresh(source):
                by_kid.update(source.fetched.keys)
        by_kid.update(self._files.by_kid)
        return IssuerKeys(by_kid)

    async def check_sources(self) -> list[str]:
        """Fetch every source once now, past the cache (the preflight check): one line per source that gave
        no usable set."""
        problems: list[str] = []
        for source in self._sources:
            try:
                await self._fetch(source.url)
            except IssuerSourceError as exc:
                problems.append(str(exc))
        return problems

    def _fresh(self, source: _Source) -> bool:
        return source.fetched is not None and self._clock() - source.fetched.at < self._refresh_s

    async def _refetch(self, source: _Source, needed: Callable[[_Source], bool]) -> None:
        async with source.lock:
            # Another caller may have fetched while this one waited: ask again under the lock.
            if not needed(source):
                return
            if source.attempted_at is not None and self._clock() - source.attempted_at < self._min_refetch_s:
                return
            source.attempted_at = self._clock()
            try:
                keys = await self._fetch(source.url)
            except IssuerSourceError as exc:
                logger.warning("AP2 issuer keys not refreshed: %s", exc)
                return
            source.fetched = _Fetched(keys.by_kid, self._clock())
            logger.info("AP2 issuer keys fetched: %s (%d key(s))", source.url, len(keys.by_kid))

    async def _fetch(self, url: str) -> IssuerKeys:
        assert self._http is not None  # a source is made only with a client (__init__)
        try:
            body = await fetch_key_set(self._http, url, timeout_s=self._timeout_s, max_bytes=self._max_bytes)
        except JwksInvalidError:  # the only thing fetch_key_set finds invalid is the size
            raise IssuerSourceError(f"{url} answered over the limit of {self._max_bytes} bytes") from None
        except AgentCardError as exc:  # its words start with the URL
            raise IssuerSourceError(str(exc).splitlines()[0]) from None
        try:
            document = json.loads(body)
            if not isinstance(document, dict):
                raise ValueError("not a JWK Set (a JSON object with keys)")
            return IssuerKeys.from_jwks(document)
        except (ValueError, RecursionError) as exc:
            # json's messages give a position, never the text; IssuerKeys' name a kid at most.
            reason = str(exc).splitlines()[0][:200] if isinstance(exc, ValueError) else "nested too deep"
            raise IssuerSourceError(f"{url}: {reason}") from None
