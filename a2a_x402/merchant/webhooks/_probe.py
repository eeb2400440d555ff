"""`webhook.test`: one signed, unstored event sent to each of a tenant's endpoints, to check them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

import httpx
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from ._endpoints import endpoint_from_row
from ._events import EventType, WebhookTestData, serialize_event
from ._ids import new_id
from ._models import WebhookEndpoint
from ._sender import REQUEST_TIMEOUT_S, send_signed

__all__ = ["EndpointProbe", "send_test_event"]

_endpoints = cast(sa.Table, WebhookEndpoint.__table__)


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointProbe:
    """The result of sending `webhook.test` to one endpoint."""

    endpoint_id: str
    url: str
    status_code: int | None
    latency_ms: int
    error: str | None

    @property
    def ok(self) -> bool:
        """Whether the endpoint answered 2xx."""
        return self.status_code is not None and 200 <= self.status_code < 300


async def send_test_event(
    engine: AsyncEngine,
    client: httpx.AsyncClient,
    tenant: str,
    *,
    allow_private_targets: bool = False,
    timeout_s: float = REQUEST_TIMEOUT_S,
) -> list[EndpointProbe]:
    """Send a signed `webhook.test` event to each of the tenant's active endpoints, now, once; the event
    is not stored and no retry is made. Returns one result per endpoint."""
    async with engine.connect() as connection:
        rows = (
            await connection.execute(
                sa.select(_endpoints)
                .where(_endpoints.c.tenant == tenant, _endpoints.c.status == "active")
                .order_by(_endpoints.c.id)
            )
        ).all()
    results: list[EndpointProbe] = []
    for endpoint in map(endpoint_from_row, rows):
        event_id = new_id("evt")
        data = WebhookTestData(
            tenant=tenant, endpoint_id=endpoint.id, message="test event from x402-merchant"
        )
        payload = serialize_event(
            EventType.WEBHOOK_TEST, event_id=event_id, timestamp=datetime.now(UTC), sequence=None, data=data
        )
        response = await send_signed(
            client,
            endpoint.url,
            event_id,
            payload,
            endpoint.signing_secrets(datetime.now(UTC)),
            allow_private=allow_private_targets,
            timeout_s=timeout_s,
        )
        results.append(
            EndpointProbe(
                endpoint_id=endpoint.id,
                url=endpoint.url,
                status_code=response.status_code,
                latency_ms=response.latency_ms,
                error=response.error,
            )
        )
    return results
