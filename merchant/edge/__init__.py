"""The merchant's edge: the A2A 1.0 app (JSON-RPC and HTTP+JSON on a2a-sdk), its Agent Card and tenancy.

The only part of the merchant that knows HTTP, JSON-RPC and protocol versions. It serves any a2a-sdk
`AgentExecutor`; tasks are stored durably and scoped to their tenant. URL layout: `merchant.edge.paths`.
"""

from __future__ import annotations

from .app import MERCHANT_SCHEMA_BRANCH, CardModifier, HandlerLayer, create_app
from .card import AgentCardSettings, CardSettingsError, build_agent_card
from .paths import AGENT_CARD_PATH, HEALTH_PATH, JSONRPC_PATH, REST_PATH

__all__ = [
    "AGENT_CARD_PATH",
    "AgentCardSettings",
    "CardModifier",
    "CardSettingsError",
    "HEALTH_PATH",
    "HandlerLayer",
    "JSONRPC_PATH",
    "MERCHANT_SCHEMA_BRANCH",
    "REST_PATH",
    "build_agent_card",
    "create_app",
]
