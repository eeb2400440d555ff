"""Webhook endpoints: any number per tenant from the tenant configuration, each subscribed to chosen event
types, with up to two signing secrets.

The tenant config seeds endpoints (`sync`): a configured (tenant, URL) that is missing is created with the
configured secret and event types; an existing one takes the configured event types; an endpoint whose URL
is no longer configured is disabled (`not_configured`) and comes back if configured again. Subscriptions
apply to events booked from then on. After that the database owns the endpoint's secret: `rotate_secret`
moves the current secret to `previous_secret`, which keeps signing (two `v1,` signatures) until the
overlap ends, so a receiver can switch secrets without losing a delivery. A 410 from the receiver disables
the endpoint (`gone`); `enable` resumes it, and its pending deliveries with it. Events booked while it was
disabled were never queued for it and are not queued by `enable`: the receiver replays them, or the
operator redelivers them.

Secrets are stored as given, because signing needs them; protect the database accordingly.
"""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from a2a_x402.merchant.tenants import tenant_name
from a2a_x402.storage import write_transaction

from ._errors import EndpointNotFoundError, InvalidEventError, InvalidWebhookSecretError
from ._events import EventType
from ._ids import new_id
from ._models import WebhookEndpoint

__all__ = [
    "DEFAULT_ROTATION_OVERLAP",
    "Endpoint",
    "EndpointConfig",
    "WebhookEndpoints",
    "active_endpoints",
    "disable_endpoint",
    "endpoint_from_row",
    "generate_secret",
    "validate_secret",
]

logger = logging.getLogger(__name__)

DEFAULT_ROTATION_OVERLAP = timedelta(hours=24)
"""How long the previous secret keeps signing after a rotation."""

_SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
_SECRET_BYTES = 32
_SECRET_BYTES_MIN, _SECRET_BYTES_MAX = 24, 64
_NOT_CONFIGURED = "not_configured"
_endpoints = cast(sa.Table, WebhookEndpoint.__table__)


def generate_secret() -> str:
    """A new signing secret: `whsec_` + base64 of 32 random bytes."""
    return _SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode()


def validate_secret(secret: str) -> str:
    """`secret` if it is `whsec_` + base64 of 24 to 64 bytes (the Standard Webhooks form).

    Raises:
        InvalidWebhookSecretError: otherwise (the message never contains the secret).
    """
    if not isinstance(secret, str) or not secret.startswith(_SECRET_PREFIX):
        raise InvalidWebhookSecretError("a webhook secret must start with whsec_")
    # ValueError covers both refusals: binascii.Error (bad base64) and the ValueError for non-ASCII text.
    try:
        key = base64.b64decode(secret[len(_SECRET_PREFIX) :], validate=True)
    except ValueError as exc:
        raise InvalidWebhookSecretError("a webhook secret must be whsec_ followed by base64") from exc
    if not _SECRET_BYTES_MIN <= len(key) <= _SECRET_BYTES_MAX:
        raise InvalidWebhookSecretError(
            f"a webhook secret must hold {_SECRET_BYTES_MIN} to {_SECRET_BYTES_MAX} bytes, not {len(key)}"
        )
    return secret


def _now() -> datetime:
    return datetime.now(UTC)


def _event_types(types: Iterable[str]) -> tuple[str, ...]:
    try:
        return tuple(sorted({EventType(name).value for name in types}))
    except ValueError as exc:
        raise InvalidEventError(f"unknown event type: {exc}") from exc


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """An endpoint as configured for a tenant (its URL, secret and event types); no event types means all."""

    tenant: str
    url: str
    secret: str = field(repr=False)
    event_types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """A stored endpoint. Secrets are kept out of `repr` so they never reach a log."""

    id: str
    tenant: str
    url: str
    event_types: tuple[str, ...]
    status: str
    disabled_reason: str | None
    secret: str = field(repr=False)
    previous_secret: str | None = field(repr=False)
    previous_secret_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @property
    def active(self) -> bool:
        """Whether deliveries to this endpoint are made."""
        return self.status == "active"

    def signing_secrets(self, now: datetime) -> tuple[str, ...]:
        """The secrets that sign a delivery made at `now`: the current one, and the previous one if its
        overlap has not ended."""
        expires = self.previous_secret_expires_at
        if self.previous_secret is not None and expires is not None and now < expires:
            return (self.secret, self.previous_secret)
        return (self.secret,)

    def subscribes(self, event_type: str) -> bool:
        """Whether events of `event_type` go to this endpoint."""
        return not self.event_types or event_type in self.event_types


def endpoint_from_row(row: sa.Row[Any]) -> Endpoint:
    """A `webhook_endpoints` row as an `Endpoint`."""
    return Endpoint(
        id=row.id,
        tenant=row.tenant,
        url=row.url,
        event_types=tuple(row.event_types),
        status=row.status,
        disabled_reason=row.disabled_reason,
        secret=row.secret,
        previous_secret=row.previous_secret,
        previous_secret_expires_at=row.previous_secret_expires_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


# Built once: read with every event enqueued.
_ACTIVE_ENDPOINTS = (
    sa.select(_endpoints)
    .where(_endpoints.c.tenant == sa.bindparam("_tenant"), _endpoints.c.status == "active")
    .order_by(_endpoints.c.id)
)


async def active_endpoints(connection: AsyncConnection, tenant: str, event_type: str) -> list[Endpoint]:
    """The tenant's active endpoints subscribed to `event_type`, in id order."""
    rows = await connection.execute(_ACTIVE_ENDPOINTS, {"_tenant": tenant})
    return subscribed(rows, event_type)


def active_endpoints_after(write: sa.CTE) -> sa.Select[Any]:
    """The read of `active_endpoints` (parameter `_tenant`) as one statement with `write`, a data-modifying
    CTE that runs with it (PostgreSQL)."""
    return _ACTIVE_ENDPOINTS.add_cte(write)


def subscribed(rows: Iterable[sa.Row[Any]], event_type: str) -> list[Endpoint]:
    """The endpoints of the rows of `active_endpoints_after` subscribed to `event_type`."""
    return [endpoint for endpoint in map(endpoint_from_row, rows) if endpoint.subscribes(event_type)]


class WebhookEndpoints:
    """Managing the endpoints stored in `engine`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def sync(self, configs: Iterable[EndpointConfig]) -> list[Endpoint]:
        """Make the stored endpoints match the configuration (see the module docstring); returns them all.

        Safe to run concurrently from several replicas at startup.

        Raises:
            InvalidWebhookSecretError: a configured secret is malformed.
            InvalidEventError: a configured event type is unknown.
        """
        wanted = {(config.tenant, config.url): config for config in configs}
        subscribed: dict[tuple[str, str], tuple[str, ...]] = {}
        for key, config in wanted.items():
            validate_secret(config.secret)
            subscribed[key] = _event_types(config.event_types)
        now = _now()
        async with write_transaction(self._engine) as connection:
            insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
            for config in wanted.values():
                statement = insert(_endpoints).values(
                    id=new_id("we"),
                    tenant=config.tenant,
                    url=config.url,
                    event_types=list(subscribed[(config.tenant, config.url)]),
                    secret=config.secret,
                    status="active",
                    created_at=now,
                    updated_at=now,
                )
                await connection.execute(statement.on_conflict_do_nothing(index_elements=["tenant", "url"]))
            stored = [endpoint_from_row(row) for row in await connection.execute(sa.select(_endpoints))]
            for endpoint in stored:
                configured = wanted.get((endpoint.tenant, endpoint.url))
                if configured is None and endpoint.active:
                    await _set_status(connection, endpoint.id, "disabled", _NOT_CONFIGURED, now)
                elif configured is not None and endpoint.disabled_reason == _NOT_CONFIGURED:
                    await _set_status(connection, endpoint.id, "active", None, now)
                event_types = subscribed.get((endpoint.tenant, endpoint.url))
                if event_types is not None and event_types != endpoint.event_types:
                    await connection.execute(
                        sa.update(_endpoints)
                        .where(_endpoints.c.id == endpoint.id)
                        .values(event_types=list(event_types), updated_at=now)
                    )
                if configured is not None and configured.secret not in (
                    endpoint.secret,
                    endpoint.previous_secret,
                ):
                    logger.warning(
                        "webhook endpoint %s: the configured secret differs from the stored one, which is "
                        "kept (rotate with `webhooks rotate-secret`)",
                        endpoint.id,
                    )
        return await self.list()

    async def list(self, tenant: str | None = None) -> list[Endpoint]:
        """The stored endpoints (of `tenant` when given), in id order."""
        statement = sa.select(_endpoints).order_by(_endpoints.c.id)
        if tenant is not None:
            statement = statement.where(_endpoints.c.tenant == tenant)
        async with self._engine.connect() as connection:
            return [endpoint_from_row(row) for row in await connection.execute(statement)]

    async def resolve(self, tenant: str, endpoint_id: str | None = None) -> Endpoint:
        """The tenant's endpoint `endpoint_id`, or its only endpoint when no id is given.

        Raises:
            EndpointNotFoundError: no such endpoint for this tenant, or no id given and the tenant has
                none or several.
        """
        endpoints = await self.list(tenant)
        if endpoint_id is not None:
            endpoints = [endpoint for endpoint in endpoints if endpoint.id == endpoint_id]
            if not endpoints:
                raise EndpointNotFoundError(f"tenant {tenant_name(tenant)!r} has no endpoint {endpoint_id!r}")
        if len(endpoints) != 1:
            raise EndpointNotFoundError(
                f"tenant {tenant_name(tenant)!r} has {len(endpoints)} endpoints; name one with its id"
            )
        return endpoints[0]

    async def rotate_secret(
        self,
        endpoint_id: str,
        *,
        new_secret: str | None = None,
        overlap: timedelta = DEFAULT_ROTATION_OVERLAP,
    ) -> Endpoint:
        """Make `new_secret` (a fresh one when None) current; the old one keeps signing for `overlap`.

        Raises:
            EndpointNotFoundError: no such endpoint.
            InvalidWebhookSecretError: `new_secret` is malformed.
        """
        secret = validate_secret(new_secret) if new_secret is not None else generate_secret()
        now = _now()
        async with write_transaction(self._engine) as connection:
            updated = await connection.execute(
                sa.update(_endpoints)
                .where(_endpoints.c.id == endpoint_id)
                .values(
                    previous_secret=_endpoints.c.secret,
                    previous_secret_expires_at=now + overlap,
                    secret=secret,
                    updated_at=now,
                )
            )
            if updated.rowcount != 1:
                raise EndpointNotFoundError(f"no endpoint {endpoint_id!r}")
        logger.info(
            "webhook endpoint %s: secret rotated, previous secret signs until %s", endpoint_id, now + overlap
        )
        return await self._get(endpoint_id)

    async def enable(self, endpoint_id: str) -> Endpoint:
        """Resume deliveries to a disabled endpoint (its pending deliveries go out again; events booked while
        it was disabled are not queued: replay or redeliver them).

        Raises:
            EndpointNotFoundError: no such endpoint.
        """
        async with write_transaction(self._engine) as connection:
            if not await _set_status(connection, endpoint_id, "active", None, _now()):
                raise EndpointNotFoundError(f"no endpoint {endpoint_id!r}")
        return await self._get(endpoint_id)

    async def _get(self, endpoint_id: str) -> Endpoint:
        async with self._engine.connect() as connection:
            row = (
                await connection.execute(sa.select(_endpoints).where(_endpoints.c.id == endpoint_id))
            ).one()
        return endpoint_from_row(row)


async def _set_status(
    connection: AsyncConnection, endpoint_id: str, status: str, reason: str | None, now: datetime
) -> bool:
    result = await connection.execute(
        sa.update(_endpoints)
        .where(_endpoints.c.id == endpoint_id)
        .values(status=status, disabled_reason=reason, updated_at=now)
    )
    return bool(result.rowcount == 1)


async def disable_endpoint(connection: AsyncConnection, endpoint_id: str, reason: str) -> None:
    """Stop deliveries to `endpoint_id` (inside the caller's transaction)."""
    await _set_status(connection, endpoint_id, "disabled", reason, _now())
