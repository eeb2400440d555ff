"""The outbox's tables as SQLAlchemy 2 models. The schema itself is made only by migration m0002.

- `webhook_endpoints`: where a tenant's events go, with the secret(s) that sign them. During a rotation the
  previous secret keeps signing until `previous_secret_expires_at`.
- `webhook_events`: one row per event, written in the transaction of the fact it reports; `payload` is the
  body serialized once, sent byte for byte on every attempt. Never updated.
- `webhook_deliveries`: one row per (event, endpoint): `pending` until `delivered` or `failed`. A worker
  claims a due row by setting `lease_until` / `lease_token`, sends outside any transaction, then records
  the outcome only if it still holds the lease.
- `webhook_attempts`: the delivery log, one row per attempt. Never updated.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from a2a_x402.storage import UtcDateTime

__all__ = ["WebhookAttempt", "WebhookBase", "WebhookDelivery", "WebhookEndpoint", "WebhookEvent"]

_ID = sa.String(40)
_TIME = UtcDateTime()


class WebhookBase(DeclarativeBase):
    """Declarative base of the outbox's tables."""


class WebhookEndpoint(WebhookBase):
    """A tenant's webhook receiver; `event_types` empty means every type."""

    __tablename__ = "webhook_endpoints"
    __table_args__ = (sa.UniqueConstraint("tenant", "url", name="uq_webhook_endpoints_tenant_url"),)

    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    tenant: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    url: Mapped[str] = mapped_column(sa.String(2048), nullable=False)
    event_types: Mapped[list[str]] = mapped_column(sa.JSON, nullable=False)
    secret: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    previous_secret: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(_TIME, nullable=True)
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    disabled_reason: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)


class WebhookEvent(WebhookBase):
    """An event and its serialized body."""

    __tablename__ = "webhook_events"
    __table_args__ = (sa.Index("ix_webhook_events_tenant_sequence", "tenant", "sequence"),)

    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    tenant: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    sequence: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, unique=True)
    payload: Mapped[bytes] = mapped_column(sa.LargeBinary, nullable=False)
    created_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)


class WebhookDelivery(WebhookBase):
    """The delivery of one event to one endpoint.

    `attempts` counts claims ever made; `round_start` is its value when the current round of retries began
    (a manual redelivery starts a new round), so `attempts - round_start` indexes the retry schedule.
    """

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("event_id", "endpoint_id", name="uq_webhook_deliveries_event_endpoint"),
        sa.Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
    )

    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    event_id: Mapped[str] = mapped_column(_ID, sa.ForeignKey("webhook_events.id"), nullable=False)
    endpoint_id: Mapped[str] = mapped_column(
        _ID, sa.ForeignKey("webhook_endpoints.id"), nullable=False, index=True
    )
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    attempts: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    round_start: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    next_attempt_at: Mapped[datetime | None] = mapped_column(_TIME, nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(_TIME, nullable=True)
    lease_token: Mapped[str | None] = mapped_column(sa.String(32), nullable=True)
    last_status_code: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(_TIME, nullable=True)
    created_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)


class WebhookAttempt(WebhookBase):
    """One attempt to deliver: when, by which worker, how long, what came back, and what happens next."""

    __tablename__ = "webhook_attempts"

    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    delivery_id: Mapped[str] = mapped_column(
        _ID, sa.ForeignKey("webhook_deliveries.id"), nullable=False, index=True
    )
    attempt: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    worker: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    started_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)
    latency_ms: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    status_code: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    outcome: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    next_attempt_at: Mapped[datetime | None] = mapped_column(_TIME, nullable=True)
