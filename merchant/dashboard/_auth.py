"""Who may see a tenant's dashboard: whoever presents that tenant's API token.

The token comes as `Authorization: Bearer <token>` on any request, or once through the log-in form, which
answers with a session cookie instead of the token: `<expiry>.<HMAC-SHA256 keyed with the token over the
tenant and the expiry>`. The cookie is HttpOnly, SameSite=Strict, scoped to that tenant's dashboard path
(and Secure when the merchant's public URL is HTTPS); it is not the token, so it opens no other API, it
expires, and changing the token ends every session. Nothing is stored on the server.

Every comparison is constant-time (`hmac.compare_digest`). An unknown tenant, a tenant without a token, a
wrong token and another tenant's token are all refused alike, so the dashboard does not tell which tenants
exist.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SESSION_COOKIE", "DashboardAuth"]

SESSION_COOKIE = "x402_dashboard"
"""The session cookie's name (one per tenant: each is scoped to its tenant's dashboard path)."""

_SESSION_TTL_S = 12 * 3600
_CONTEXT = b"x402-dashboard-session\n"
_EXPIRY = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True, slots=True)
class DashboardAuth:
    """Checks tokens and sessions for tenants; `api_token_of(tenant id)` is the tenant's API token or None
    (unknown tenant, or none configured), as for the billing API."""

    api_token_of: Callable[[str], str | None]
    session_ttl_s: int = _SESSION_TTL_S

    def token_matches(self, tenant: str, token: str | None) -> bool:
        """Whether `token` is `tenant`'s API token."""
        expected = self.api_token_of(tenant)
        if expected is None or token is None:
            return False
        return hmac.compare_digest(token.encode(), expected.encode())

    def new_session(self, tenant: str, *, now: float | None = None) -> str:
        """A session cookie value for `tenant`, valid for `session_ttl_s`; the tenant must have a token."""
        expected = self.api_token_of(tenant)
        if expected is None:
            raise ValueError("a session needs a tenant with an API token")
        expires = int(time.time() if now is None else now) + self.session_ttl_s
        return f"{expires}.{_mac(expected, tenant, expires)}"

    def session_matches(self, tenant: str, value: str | None, *, now: float | None = None) -> bool:
        """Whether `value` is an unexpired session cookie issued for `tenant` with its current token."""
        expected = self.api_token_of(tenant)
        if expected is None or not value:
            return False
        expires_text, _, mac = value.partition(".")
        if not _EXPIRY.fullmatch(expires_text) or int(expires_text) <= (time.time() if now is None else now):
            return False
        return hmac.compare_digest(mac.encode(), _mac(expected, tenant, int(expires_text)).encode())


def _mac(token: str, tenant: str, expires: int) -> str:
    message = _CONTEXT + tenant.encode() + b"\n" + str(expires).encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()
