"""The API key store's table definition and its migration (f0005) describe the same table."""

from __future__ import annotations

from a2a_x402.facilitator._api_keys import api_keys_table
from tests.fixtures.schema import migration_differences


async def test_the_api_keys_table_matches_the_migrations(database_url: str) -> None:
    assert await migration_differences(database_url, api_keys_table.metadata) == []
