"""Who may see a tenant's dashboard: whoever presents that tenant's API token, or a session opened with it.

The token comes as `Authorization: Bearer <token>` on any request, or once through the log-in form, which
answers with a session cookie instead of the token: a random session id bound to a server record
(`SessionStore`): opened at each log-in (a new id every time), ended at log-out, expiring after
`session_ttl_s`, and ended too when the tenant's token changes. The cookie is HttpOnly, SameSite=Strict,
scoped to that tenant's dashboard path (and Secure when the merchant's public URL is HTTPS); it is not the
token, so it opens no other API.

Every comparison is constant-time (`hmac.compare_digest`). An unknown tenant, a tenant without a token, a
wrong token and another tenant's token are all refused alike, so the dashboard does not tell which tenants
exist.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ._sessions import SessionStore

__all__ = ["SESSION_COOKIE", "DashboardAuth"]

SESSION_COOKIE = "x402_dashboard"
"""The session cookie's name (one per tenant: each is scoped to its tenant's dashboard path)."""

_SESSION_TTL_S = 12 * 3600


@dataclass(frozen=True, slots=True)
class DashboardAuth:
    """Checks tokens and sessions for tenants; `api_token_of(tenant id)` is the tenant's API token or None
    (unknown tenant, or none configured), as for the billing API; `sessions` holds the session records."""

    api_token_of: Callable[[str], str | None]
    sessions: SessionStore
    session_ttl_s: int = _SESSION_TTL_S

    def token_matches(self, tenant: str, token: str | None) -> bool:
        """Whether `token` is `tenant`'s API token."""
        expected = self.api_token_of(tenant)
        if expected is None or token is None:
            return False
        return hmac.compare_digest(token.encode(), expected.encode())

    async def new_session(
        self, tenant: str, *, replacing: str | None = None, now: datetime | None = None
    ) -> str:
        """A new session id for `tenant`, valid for `session_ttl_s`; the tenant must have a token. The
        session `replacing` (the cookie the browser came with) is ended."""
        expected = self.api_token_of(tenant)
        if expected is None:
            raise ValueError("a session needs a tenant with an API token")
        return await self.sessions.open(
            tenant, expected, ttl_s=self.session_ttl_s, replacing=replacing, now=now
        )

    async def session_matches(self, tenant: str, value: str | None, *, now: datetime | None = None) -> bool:
        """Whether `value` is an open, unexpired session of `tenant` opened with its current token."""
        expected = self.api_token_of(tenant)
        if expected is None or not value:
            return False
        return await self.sessions.valid(tenant, value, expected, now=now)

    async def end_session(self, value: str | None) -> None:
        """End the session `value` (log-out); an unknown or ended one is left as it is."""
        await self.sessions.revoke(value)
