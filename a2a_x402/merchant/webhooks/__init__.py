"""Billing webhooks: a transactional outbox fed by the ledger, and workers that deliver it signed.

Events (`settlement.pending|completed|failed|finalized|reversed`) are written in the same database
transaction as the fact they report (`Outbox.publish` is the ledger's event sink; `Outbox.record_event`
serves the payment layer), serialized once, and delivered at least once to each tenant endpoint by
`DeliveryWorker`s: Standard Webhooks signatures (`standardwebhooks`), retries with backoff and jitter for
about three days, 410 disables the endpoint, `Retry-After` honoured, SSRF guard on every target. JSON
Schemas of every event type are under `schemas/`. `create_billing_router` serves per-tenant balances,
statements, event replay and redelivery, and the bounds on the tenant's callers it reads and sets
(`TenantLimits`); `webhooks_cli` the operator commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._backlog import delivery_backlog
    from ._delivery import DeliveryWorker
    from ._endpoints import (
        DEFAULT_ROTATION_OVERLAP,
        Endpoint,
        EndpointConfig,
        WebhookEndpoints,
        generate_secret,
        validate_secret,
    )
    from ._errors import (
        EndpointNotFoundError,
        EventNotFoundError,
        InvalidEventError,
        InvalidWebhookSecretError,
        UnsafeTargetError,
        WebhookError,
    )
    from ._events import (
        EVENT_DATA_MODELS,
        EVENT_MODELS,
        Ap2Data,
        EventModel,
        EventType,
        SettlementCompletedData,
        SettlementFailedData,
        SettlementFinalizedData,
        SettlementPendingData,
        SettlementReversedData,
        WebhookTestData,
        event_json_schema,
    )
    from ._models import WebhookAttempt, WebhookBase, WebhookDelivery, WebhookEndpoint, WebhookEvent
    from ._outbox import DeliveryLogEntry, DeliveryState, Outbox, StoredEvent
    from ._probe import EndpointProbe, send_test_event
    from ._retry import RETRY_SCHEDULE_S, RetryPolicy
    from ._routes import ApiTokenLookup, TenantLimits, create_billing_router
    from ._sender import REQUEST_TIMEOUT_S
    from ._signing import signature_header, webhook_headers
    from ._ssrf import RESOLVE_TIMEOUT_S, Target, is_public_address, resolve_target
    from .cli import WebhookSettings, endpoint_configs, webhooks_cli

__all__ = [
    "DEFAULT_ROTATION_OVERLAP",
    "EVENT_DATA_MODELS",
    "EVENT_MODELS",
    "REQUEST_TIMEOUT_S",
    "RESOLVE_TIMEOUT_S",
    "RETRY_SCHEDULE_S",
    "Ap2Data",
    "ApiTokenLookup",
    "DeliveryLogEntry",
    "DeliveryState",
    "DeliveryWorker",
    "Endpoint",
    "EndpointConfig",
    "EndpointNotFoundError",
    "EndpointProbe",
    "EventModel",
    "EventNotFoundError",
    "EventType",
    "InvalidEventError",
    "InvalidWebhookSecretError",
    "Outbox",
    "RetryPolicy",
    "SettlementCompletedData",
    "SettlementFailedData",
    "SettlementFinalizedData",
    "SettlementPendingData",
    "SettlementReversedData",
    "StoredEvent",
    "Target",
    "TenantLimits",
    "UnsafeTargetError",
    "WebhookAttempt",
    "WebhookBase",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEndpoints",
    "WebhookError",
    "WebhookEvent",
    "WebhookSettings",
    "WebhookTestData",
    "create_billing_router",
    "delivery_backlog",
    "endpoint_configs",
    "event_json_schema",
    "generate_secret",
    "is_public_address",
    "resolve_target",
    "send_test_event",
    "signature_header",
    "validate_secret",
    "webhook_headers",
    "webhooks_cli",
]

_EXPORTS = {
    "_backlog": ("delivery_backlog",),
    "_delivery": ("DeliveryWorker",),
    "_endpoints": (
        "DEFAULT_ROTATION_OVERLAP",
        "Endpoint",
        "EndpointConfig",
        "WebhookEndpoints",
        "generate_secret",
        "validate_secret",
    ),
    "_errors": (
        "EndpointNotFoundError",
        "EventNotFoundError",
        "InvalidEventError",
        "InvalidWebhookSecretError",
        "UnsafeTargetError",
        "WebhookError",
    ),
    "_events": (
        "EVENT_DATA_MODELS",
        "EVENT_MODELS",
        "EventModel",
        "EventType",
        "Ap2Data",
        "SettlementCompletedData",
        "SettlementFailedData",
        "SettlementFinalizedData",
        "SettlementPendingData",
        "SettlementReversedData",
        "WebhookTestData",
        "event_json_schema",
    ),
    "_models": ("WebhookAttempt", "WebhookBase", "WebhookDelivery", "WebhookEndpoint", "WebhookEvent"),
    "_outbox": ("DeliveryLogEntry", "DeliveryState", "Outbox", "StoredEvent"),
    "_probe": ("EndpointProbe", "send_test_event"),
    "_retry": ("RETRY_SCHEDULE_S", "RetryPolicy"),
    "_routes": ("ApiTokenLookup", "TenantLimits", "create_billing_router"),
    "_sender": ("REQUEST_TIMEOUT_S",),
    "_signing": ("signature_header", "webhook_headers"),
    "_ssrf": ("RESOLVE_TIMEOUT_S", "Target", "is_public_address", "resolve_target"),
    "cli": ("WebhookSettings", "endpoint_configs", "webhooks_cli"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
