"""The reference merchant: the text-stats skill (`demo_skill`), paid per request through `paid.paid_app`.

`x402-merchant serve` serves it. Its parts are built by `wiring`, which the commands that build one part
alone (the reconciler, the tenants) import directly.
"""

from __future__ import annotations

from a2a.server.agent_execution import AgentExecutor
from fastapi import FastAPI

from .demo_skill import TEXT_STATS_SKILL, TextStatsExecutor
from .paid import paid_app
from .settings import MerchantSettings
from .tenants import TenantRegistry

__all__ = ["MERCHANT_SKILLS", "build_app"]

MERCHANT_SKILLS = (TEXT_STATS_SKILL,)
"""The skills the reference merchant offers (its card lists them; `skill_prices` keys must name one)."""


def build_app(
    settings: MerchantSettings,
    *,
    tenants: TenantRegistry | None = None,
    delegate: AgentExecutor | None = None,
) -> FastAPI:
    """The reference merchant app for `settings`; connections open in the app's lifespan.

    `delegate` does the paid work of the text-stats skill (default: `TextStatsExecutor`); tests put an
    executor there that fails or waits, to exercise the payment layer around it. `tenants` replaces those
    `settings` name.
    """
    return paid_app(
        delegate if delegate is not None else TextStatsExecutor(),
        name="x402 reference merchant",
        description="Text statistics, paid per request in USDC over the A2A x402 extension.",
        version="0.1.0",
        skills=MERCHANT_SKILLS,
        settings=settings,
        tenants=tenants,
    )
