"""Webhook exceptions. Each has a stable `code`; the HTTP router maps them to statuses in one table.

WebhookError
├── InvalidEventError          an event type or payload does not match its schema (also a ValueError)
├── EventNotFoundError         no event with this id for this tenant (also a LookupError)
├── EndpointNotFoundError      no such endpoint, or the tenant's endpoint is ambiguous (also a LookupError)
├── InvalidWebhookSecretError  a signing secret is not `whsec_` + base64 of 24-64 bytes (also a ValueError)
└── UnsafeTargetError          a delivery URL points at a private, loopback or link-local address
"""

from __future__ import annotations

__all__ = [
    "EndpointNotFoundError",
    "EventNotFoundError",
    "InvalidEventError",
    "InvalidWebhookSecretError",
    "UnsafeTargetError",
    "WebhookError",
]


class WebhookError(Exception):
    """Root of every exception the webhooks package raises on purpose."""

    code = "webhook_error"


class InvalidEventError(WebhookError, ValueError):
    """The event type is unknown or not emitted this way, or its data does not match the type's schema."""

    code = "invalid_event"


class EventNotFoundError(WebhookError, LookupError):
    """The tenant has no event with this id (another tenant's event is reported the same way)."""

    code = "event_not_found"

    def __init__(self, event_id: str) -> None:
        self.event_id = event_id
        super().__init__(f"no event {event_id!r}")


class EndpointNotFoundError(WebhookError, LookupError):
    """No endpoint matches, or a tenant with several endpoints was asked for 'its' endpoint."""

    code = "endpoint_not_found"


class InvalidWebhookSecretError(WebhookError, ValueError):
    """A signing secret is not in the Standard Webhooks form `whsec_<base64 of 24 to 64 random bytes>`."""

    code = "invalid_webhook_secret"


class UnsafeTargetError(WebhookError):
    """The delivery URL is not http(s), or resolves to an address that is not publicly routable.

    Refused so that a tenant's webhook URL cannot make the merchant call into its own network (SSRF).
    """

    code = "unsafe_webhook_target"
