"""The webhook deliveries as the dashboard shows them: each endpoint of the tenant (never its secrets), the
delivery of each event to it, and every attempt with its answer and next retry."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from a2a_x402.merchant.webhooks import DeliveryLogEntry, DeliveryState

from ._format import format_time

__all__ = ["AttemptView", "DeliveryView", "EndpointView", "delivery_views"]


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt from the delivery log."""

    attempt: int
    started_at: str
    outcome: str
    status_code: int | None
    latency_ms: int | None
    error: str | None
    next_attempt_at: str


@dataclass(frozen=True, slots=True)
class DeliveryView:
    """The delivery of one event to one endpoint, with its attempts (newest first) and next retry."""

    event_id: str
    event_type: str
    sequence: int
    endpoint_id: str
    url: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_retry_at: str
    delivered_at: str
    log: tuple[AttemptView, ...]


@dataclass(frozen=True, slots=True)
class EndpointView:
    """A webhook endpoint of the tenant (no secrets) and its recent deliveries."""

    id: str
    url: str
    status: str
    disabled_reason: str | None
    event_types: tuple[str, ...]
    deliveries: tuple[DeliveryView, ...]


def delivery_views(
    deliveries: Sequence[DeliveryState], log: Sequence[DeliveryLogEntry]
) -> tuple[DeliveryView, ...]:
    """`deliveries` in their order, each with its attempts from `log`."""
    attempts: dict[tuple[str, str], list[AttemptView]] = {}
    for entry in log:
        attempts.setdefault((entry.event_id, entry.endpoint_id), []).append(
            AttemptView(
                attempt=entry.attempt,
                started_at=format_time(entry.started_at),
                outcome=entry.outcome,
                status_code=entry.status_code,
                latency_ms=entry.latency_ms,
                error=entry.error,
                next_attempt_at=format_time(entry.next_attempt_at),
            )
        )
    return tuple(
        DeliveryView(
            event_id=delivery.event_id,
            event_type=delivery.event_type,
            sequence=delivery.sequence,
            endpoint_id=delivery.endpoint_id,
            url=delivery.url,
            status=delivery.status,
            attempts=delivery.attempts,
            last_status_code=delivery.last_status_code,
            last_error=delivery.last_error,
            next_retry_at=format_time(delivery.next_attempt_at if delivery.status == "pending" else None),
            delivered_at=format_time(delivery.delivered_at),
            log=tuple(attempts.get((delivery.event_id, delivery.endpoint_id), ())),
        )
        for delivery in deliveries
    )
