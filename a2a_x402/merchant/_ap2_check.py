"""The `ap2` preflight check, for a merchant with a tenant in the embedded flow (specification §20).

Fatal: the AP2 SDK cannot be imported (mandates could not be verified), or a checkout key is not EC P-256.
The tenants file itself already refuses checkout keys and issuer files that do not load (`_tenant_ap2`),
so a registry reaching this check has them loaded. Problems, not fatal: a `jwksUrl` that is not https
(AP2 clients refuse it), a tenant that trusts no mandate issuer yet, an `https` issuer source that gives no
usable JWK Set now (fetched once, as a payment's mandates would fetch it: until it answers, the mandates
its issuer signed are refused as untrusted, and payments without mandates are taken as before), and a
tenant none of whose prices the price rule lets into the embedded flow (its terms always go out without a
checkout).
"""

from __future__ import annotations

import asyncio

import httpx

from a2a_x402.extension import Ap2PriceError, checkout_total_for_amount
from a2a_x402.observability import CheckResult

from ._ap2_card import ap2_jwks_url
from .ap2 import TrustedIssuers, ap2_sdk_available
from .settings import MerchantSettings
from .tenants import Tenant, TenantRegistry, tenant_name

__all__ = ["check_ap2", "declares_ap2"]

_NAME = "ap2"


def declares_ap2(tenants: TenantRegistry) -> bool:
    """Whether any tenant offers the embedded flow (and so the `ap2` check runs)."""
    return any(tenant.ap2 is not None for tenant in tenants)


async def check_ap2(tenants: TenantRegistry, settings: MerchantSettings) -> CheckResult:
    """`ap2`: the SDK imports, every checkout key is P-256, and each declared tenant can be offered to."""
    declared = [(tenant, tenant.ap2) for tenant in tenants if tenant.ap2 is not None]
    if not await asyncio.to_thread(ap2_sdk_available):
        return CheckResult.problem(
            _NAME, "the AP2 SDK cannot be imported: install the merchant with its [ap2] extra (scripts/setup)"
        )
    warnings: list[str] = []
    async with httpx.AsyncClient() as http:
        # All tenants' sources at once: the check's deadline is one fetch's, not their sum.
        fetched = await asyncio.gather(
            *(TrustedIssuers(ap2.issuers, ap2.issuer_urls, http).check_sources() for _, ap2 in declared)
        )
    for (tenant, _), problems in zip(declared, fetched, strict=True):
        warnings += [f"{tenant_name(tenant.id)}: issuer source {problem}" for problem in problems]
    for tenant, ap2 in declared:
        name = tenant_name(tenant.id)
        for key in ap2.checkout_keys.keys:
            if key.public_jwk().get("crv") != "P-256":
                return CheckResult.problem(_NAME, f"{name}: checkout key {key.kid} is not P-256")
        if not ap2.issuers.by_kid and not ap2.issuer_urls:
            warnings.append(f"{name}: trusts no mandate issuer (ap2.issuers)")
        if not _any_price_embeds(tenant, ap2.currency, settings.asset_decimals):
            warnings.append(
                f"{name}: no price is a whole number of {ap2.currency} minor units, so no checkout is offered"
            )
    url = ap2_jwks_url(settings.base_url, declared[0][0].id) if declared else ""
    if declared and not url.startswith("https://"):
        warnings.append(f"the jwksUrl {url} is not https (X402_PUBLIC_URL): AP2 clients refuse it")
    if warnings:
        return CheckResult.problem(_NAME, "; ".join(warnings), fatal=False)
    summary = ", ".join(
        f"{tenant_name(tenant.id)} ({len(ap2.checkout_keys.kids)} checkout key(s), "
        f"{len(ap2.issuers.by_kid)} issuer key(s) in files, {len(ap2.issuer_urls)} https issuer source(s))"
        for tenant, ap2 in declared
    )
    return CheckResult.passed(_NAME, f"the embedded flow for {summary}")


def _any_price_embeds(tenant: Tenant, currency: str, decimals: int) -> bool:
    """Whether some price of the tenant passes the price rule (§20.3) in its checkout `currency`."""
    prices = {tenant.price, *tenant.skill_prices.values(), *tenant.metered_skills.values()} - {0}
    for price in prices:
        try:
            checkout_total_for_amount(price, decimals=decimals, currency=currency)
        except Ap2PriceError:
            continue
        return True
    return not prices
