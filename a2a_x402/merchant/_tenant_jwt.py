"""A tenant's own JWT issuers: the `[[tenants.<id>.jwt_issuers]]` tables of the tenants file.

Each entry names an issuer whose bearer JWTs authenticate callers at this tenant only: its `iss`, the
`aud` a token must contain, and the URL of its JWK Set (https; plain http only on a loopback host, for
development). The merchant-wide issuer of `X402_JWT_*` stays trusted at every tenant.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ._tenant_rules import describe

__all__ = ["JWT_ISSUER_KEYS", "TenantJwtIssuer", "jwt_issuer_problems", "parse_jwt_issuers"]

JWT_ISSUER_KEYS = ("issuer", "audience", "jwks_url")
"""The keys of one `[[jwt_issuers]]` table, all required."""

_MAX_CHARS = 2048
_LOOPBACK_NAMES = frozenset({"localhost"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantJwtIssuer:
    """An issuer a tenant trusts: tokens with `iss` == `issuer`, containing `audience` in `aud`, signed by
    a key of the JWK Set at `jwks_url`. Validated by the `Tenant` that holds it (`jwt_issuer_problems`)."""

    issuer: str
    audience: str
    jwks_url: str


def _text_problems(at: str, name: str, value: object) -> list[str]:
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_CHARS:
        limit = f"a non-empty string of at most {_MAX_CHARS} characters"
        return [f"{at}.{name}: must be {limit}, got {describe(value)[:200]}"]
    return []


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _jwks_url_problems(at: str, url: object) -> list[str]:
    problem = [f"{at}.jwks_url: must be an https URL (http only on a loopback host), got {describe(url)}"]
    if not isinstance(url, str) or len(url) > _MAX_CHARS:
        return problem
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return problem
    if not host or parts.scheme not in ("http", "https"):
        return problem
    if parts.scheme == "http" and not _is_loopback(host):
        return problem
    return []


def jwt_issuer_problems(issuers: Sequence[TenantJwtIssuer]) -> list[str]:
    """The problems of a tenant's `jwt_issuers`: each field's form, and no issuer declared twice."""
    problems: list[str] = []
    seen: set[str] = set()
    for index, entry in enumerate(issuers):
        at = f"jwt_issuers[{index}]"
        problems += _text_problems(at, "issuer", entry.issuer)
        problems += _text_problems(at, "audience", entry.audience)
        problems += _jwks_url_problems(at, entry.jwks_url)
        if isinstance(entry.issuer, str):
            if entry.issuer in seen:
                # One issuer, one audience and key set per tenant: two would make "which one verified"
                # a question of order.
                problems.append(
                    f"{at}.issuer: {entry.issuer[:200]} is declared more than once for this tenant"
                )
            seen.add(entry.issuer)
    return problems


def parse_jwt_issuers(where: str, entries: Any) -> tuple[tuple[TenantJwtIssuer, ...], list[str]]:
    """The `jwt_issuers` array of a tenant table at `where`, and the problems of its shape (unknown or
    missing keys); the values are checked by the `Tenant`."""
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        return (), [f"{where}: must be an array of tables ([[...jwt_issuers]]), got {describe(entries)}"]
    issuers: list[TenantJwtIssuer] = []
    problems: list[str] = []
    allowed = ", ".join(JWT_ISSUER_KEYS)
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        problems += [
            f"{at}.{key}: unknown key (allowed: {allowed})" for key in entry if key not in JWT_ISSUER_KEYS
        ]
        missing = [key for key in JWT_ISSUER_KEYS if key not in entry]
        problems += [f"{at}.{key}: is required" for key in missing]
        if not missing:
            issuers.append(TenantJwtIssuer(**{key: entry[key] for key in JWT_ISSUER_KEYS}))
    return tuple(issuers), problems
