"""The outbox's SQLAlchemy models and migration m0002 describe the same tables, on both backends."""

from __future__ import annotations

from merchant.webhooks import WebhookBase
from storage import create_engine
from tests.fixtures.schema import schema_differences


async def test_models_match_the_migration(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(schema_differences, WebhookBase.metadata)
    finally:
        await engine.dispose()
    assert differences == []
    assert set(WebhookBase.metadata.tables) == {
        "webhook_attempts",
        "webhook_deliveries",
        "webhook_endpoints",
        "webhook_events",
    }
