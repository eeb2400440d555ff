"""The outbox's backlog: deliveries still pending, per endpoint (for `/metrics`)."""

from __future__ import annotations

from typing import cast

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from ._models import WebhookDelivery

__all__ = ["delivery_backlog"]

_deliveries = cast(sa.Table, WebhookDelivery.__table__)


async def delivery_backlog(engine: AsyncEngine) -> dict[str, int]:
    """How many deliveries each endpoint (by id) has pending: due now or waiting for a retry."""
    statement = (
        sa.select(_deliveries.c.endpoint_id, sa.func.count())
        .where(_deliveries.c.status == "pending")
        .group_by(_deliveries.c.endpoint_id)
    )
    async with engine.connect() as connection:
        return {endpoint: int(n) for endpoint, n in (await connection.execute(statement)).all()}
