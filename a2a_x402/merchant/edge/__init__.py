"""The merchant's edge: the A2A app (JSON-RPC, HTTP+JSON and gRPC on a2a-sdk), its Agent Cards and tenancy.

The only part of the merchant that knows HTTP, JSON-RPC and protocol versions: A2A 1.0 and A2A 0.3 for every
tenant (0.3 for a named tenant at URLs of its own), negotiated per request (`versions`). It serves any
a2a-sdk `AgentExecutor`; tasks are stored durably and scoped to their tenant. URL layout:
`merchant.edge.paths`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._grpc import grpc_listen_address
    from ._grpc_listen import GrpcListenError
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

_EXPORTS = {
    "_grpc": ("grpc_listen_address",),
    "_grpc_listen": ("GrpcListenError",),
    "_limits": ("RequestLimits",),
    "_task_store": ("FinalStateHook", "TaskOwnedElsewhereError", "TenantTaskStore"),
    "_tenancy": ("tenant_owner",),
    "app": ("MERCHANT_SCHEMA_BRANCH", "CardModifier", "CardSigner", "HandlerLayer", "create_app"),
    "card": (
        "AgentCardSettings",
        "CardSettingsError",
        "build_agent_card",
        "build_tenant_agent_card",
        "render_agent_card",
        "render_versionless_agent_card",
        "served_versions",
    ),
    "paths": (
        "AGENT_CARD_PATH",
        "HEALTH_PATH",
        "JSONRPC_PATH",
        "REST_PATH",
        "TENANT_ROOT_PATH",
        "tenant_root",
    ),
    "versions": ("ProtocolVersion", "VersionNegotiator", "negotiate_version"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
