"""The embedded flow's parts of `paid_app` (specification §20): what the card declares, whose keys sign a
tenant's users' mandates, the v0.2 form's carts, the evidence kept for disputes, and the check of a
payment's mandates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.extension import Ap2Declaration

from ._ap2_card import ap2_declarations
from ._metrics import MerchantMetrics
from .ap2 import Ap2EvidenceStore, MandateUsageStore, TrustedIssuers
from .payments import CartMandates, KeptMandates, Pricing
from .settings import MerchantSettings
from .tenants import TenantRegistry

__all__ = ["Ap2Parts", "ap2_parts"]


@dataclass(frozen=True, slots=True)
class Ap2Parts:
    """What the embedded flow adds to a merchant; with no tenant in it, no part declares or reads anything."""

    declarations: tuple[Ap2Declaration, ...]
    carts: CartMandates
    evidence: Ap2EvidenceStore
    mandates: KeptMandates


def ap2_parts(
    tenants: TenantRegistry,
    settings: MerchantSettings,
    *,
    engine: AsyncEngine,
    pricing: Pricing,
    titles: Mapping[str, str],
    usage: MandateUsageStore,
    jwks_http: httpx.AsyncClient,
    metrics: MerchantMetrics,
) -> Ap2Parts:
    """The embedded flow's parts for `tenants`; `titles` names each skill for a cart's items, `jwks_http`
    fetches the issuers' key sets, and `usage` is the store a round's end decides in (§20.5)."""
    embedded = {tenant.id: tenant.ap2 for tenant in tenants if tenant.ap2 is not None}
    issuers = {
        tenant_id: TrustedIssuers(entry.issuers, entry.issuer_urls, jwks_http)
        for tenant_id, entry in embedded.items()
    }
    # Kept for disputes whatever the tenants file says now: a tenant taken out of the flow still has evidence
    # to purge. The mandates join it with their presentation, the receipts with the status ending the round.
    evidence = Ap2EvidenceStore(engine, days=settings.ap2_evidence_days)
    declarations = ap2_declarations(tenants, settings.base_url)
    return Ap2Parts(
        declarations=declarations,
        # The v0.2 form of the embedded flow (§20.7), for the tenants whose `ap2` entry is required.
        carts=CartMandates(pricing, titles, issuers),
        evidence=evidence,
        # Tenants in the embedded flow verify a payment's mandates; the others refuse them.
        mandates=KeptMandates(
            ((d, issuers[d.tenant], embedded[d.tenant].checkout_keys) for d in declarations),
            usage,
            evidence=evidence,
            on_decision=metrics.mandates,
        ),
    )
