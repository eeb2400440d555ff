"""The offer store's table definition and the migrations (m0003, m0004) describe the same table."""

from __future__ import annotations

from merchant.payments._offers import offers_table
from storage import create_engine
from tests.fixtures.schema import schema_differences


async def test_the_offers_table_matches_the_migrations(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(schema_differences, offers_table.metadata)
    finally:
        await engine.dispose()
    assert differences == []
