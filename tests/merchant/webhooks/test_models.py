"""The outbox's SQLAlchemy models and migration m0002 describe the same tables, on both backends."""

from __future__ import annotations

from a2a_x402.merchant.webhooks import WebhookBase
from tests.fixtures.schema import migration_differences


async def test_models_match_the_migration(database_url: str) -> None:
    assert await migration_differences(database_url, WebhookBase.metadata) == []
    assert set(WebhookBase.metadata.tables) == {
        "webhook_attempts",
        "webhook_deliveries",
        "webhook_endpoints",
        "webhook_events",
    }
