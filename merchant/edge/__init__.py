"""The merchant's edge: the A2A app (JSON-RPC, HTTP+JSON and gRPC on a2a-sdk), its Agent Cards and tenancy.

The only part of the merchant that knows HTTP, JSON-RPC and protocol versions: A2A 1.0 and A2A 0.3 for every
tenant (0.3 for a named tenant at URLs of its own), negotiated per request (`versions`). It serves any
a2a-sdk `AgentExecutor`; tasks are stored durably and scoped to their tenant. URL layout:
`merchant.edge.paths`.
"""

from __future__ import annotations

from ._grpc import GrpcListenError, grpc_listen_address
from ._limits import RequestLimits
from ._task_store import FinalStateHook, TaskOwnedElsewhereError, TenantTaskStore
from ._tenancy import tenant_owner
from .app import MERCHANT_SCHEMA_BRANCH, CardModifier, CardSigner, HandlerLayer, create_app
from .card import (
    AgentCardSettings,
    CardSettingsError,
    build_agent_card,
    build_tenant_agent_card,
    render_agent_card,
    render_versionless_agent_card,
    served_versions,
)
from .paths import AGENT_CARD_PATH, HEALTH_PATH, JSONRPC_PATH, REST_PATH, TENANT_ROOT_PATH, tenant_root
from .versions import ProtocolVersion, VersionNegotiator, negotiate_version

__all__ = [
    "AGENT_CARD_PATH",
    "AgentCardSettings",
    "CardModifier",
    "CardSettingsError",
    "CardSigner",
    "FinalStateHook",
    "GrpcListenError",
    "HEALTH_PATH",
    "HandlerLayer",
    "JSONRPC_PATH",
    "MERCHANT_SCHEMA_BRANCH",
    "ProtocolVersion",
    "REST_PATH",
    "RequestLimits",
    "TENANT_ROOT_PATH",
    "TaskOwnedElsewhereError",
    "TenantTaskStore",
    "VersionNegotiator",
    "build_agent_card",
    "build_tenant_agent_card",
    "create_app",
    "grpc_listen_address",
    "negotiate_version",
    "render_agent_card",
    "render_versionless_agent_card",
    "served_versions",
    "tenant_owner",
    "tenant_root",
]
