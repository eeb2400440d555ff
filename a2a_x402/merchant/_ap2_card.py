"""The embedded flow's declaration (specification §20.2): what the card says of each tenant in it, and the
JWK Set of the tenant's checkout keys that it points at.

Each tenant whose entry in the tenants file has an `ap2` table gets an entry in the card's `params.ap2`
(its AP2 merchant, `required`, and `jwksUrl`), so a signed card pins the keys that may sign the tenant's
checkouts. The JWK Set is served at `/.well-known/ap2/<tenant, or "default">/jwks.json`: the public parts
only, cacheable, and 404 for a tenant not in the embedded flow.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a_x402.extension import Ap2Declaration

from .tenants import Tenant, tenant_id_of, tenant_name

__all__ = ["AP2_JWKS_PATH", "ap2_declarations", "ap2_jwks_route", "ap2_jwks_url"]

AP2_JWKS_PATH = "/.well-known/ap2/{tenant}/jwks.json"
"""Where a tenant's checkout keys are served; `{tenant}` is its id, or `default` for the default tenant."""

# As long as the card's signature JWKS: clients re-read it within minutes of a rotation, which publishes a
# new key before it signs anything (`_keys`: the first key signs, all are published).
_CACHE_CONTROL = "public, max-age=300"
_NOT_FOUND = {"error": "not_found", "message": "no tenant in the embedded flow (AP2) by that name"}


def ap2_jwks_url(base_url: str, tenant_id: str) -> str:
    """The absolute URL of a tenant's checkout-key JWK Set under the card's `base_url`."""
    return base_url.rstrip("/") + AP2_JWKS_PATH.format(tenant=tenant_name(tenant_id))


def ap2_declarations(tenants: Iterable[Tenant], base_url: str) -> tuple[Ap2Declaration, ...]:
    """The card's `params.ap2` entries: one per tenant with an `ap2` table, in the registry's order."""
    return tuple(
        Ap2Declaration(
            merchant=tenant.ap2.merchant,
            jwks_url=ap2_jwks_url(base_url, tenant.id),
            tenant=tenant.id,
            required=tenant.ap2.required,
        )
        for tenant in tenants
        if tenant.ap2 is not None
    )


def ap2_jwks_route(tenants: Iterable[Tenant]) -> Route:
    """The route serving each tenant's checkout keys as a JWK Set (public members only)."""
    served = {tenant.id: tenant.ap2.checkout_keys.public_jwks() for tenant in tenants if tenant.ap2}

    async def serve(request: Request) -> JSONResponse:
        jwks = served.get(tenant_id_of(str(request.path_params["tenant"])))
        if jwks is None:
            return JSONResponse(_NOT_FOUND, status_code=404)
        return JSONResponse(jwks, headers={"Cache-Control": _CACHE_CONTROL})

    return Route(AP2_JWKS_PATH, serve, methods=["GET"])
