"""The JWT issuers a deployment trusts: the merchant-wide one (every tenant) and each tenant's own."""

from __future__ import annotations

from collections.abc import Iterable

from ._jwt import JwtIssuer

__all__ = ["merge_issuers"]


def merge_issuers(issuers: Iterable[JwtIssuer]) -> list[JwtIssuer]:
    """`issuers` with the entries that differ only in their tenants made one, trusted at all their tenants
    (every tenant when one of them is), in first-seen order: one key set is fetched and one token check
    made per issuer, however many tenants trust it."""
    merged: dict[tuple[str, str, str, int], JwtIssuer] = {}
    for issuer in issuers:
        key = (issuer.issuer, issuer.audience, issuer.jwks_url, issuer.leeway_s)
        seen = merged.get(key)
        if seen is None:
            merged[key] = issuer
            continue
        if seen.tenants is None or issuer.tenants is None:
            tenants = None
        else:
            tenants = seen.tenants | issuer.tenants
        merged[key] = JwtIssuer(
            issuer=seen.issuer,
            audience=seen.audience,
            jwks_url=seen.jwks_url,
            tenants=tenants,
            leeway_s=seen.leeway_s,
        )
    return list(merged.values())
