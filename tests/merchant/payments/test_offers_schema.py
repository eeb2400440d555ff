"""The offer store's tables and the migrations (m0003 to m0007) describe the same tables: `payment_offers`
and `payment_presentations`."""

from __future__ import annotations

# `_unpaid` adds its callers table and an index of `payment_offers` to the same metadata: the tables as the
# merchant builds them, whichever tests ran before.
from a2a_x402.merchant.payments import _unpaid  # noqa: F401
from a2a_x402.merchant.payments._offer_table import offers_table
from tests.fixtures.schema import migration_differences


async def test_the_offers_table_matches_the_migrations(database_url: str) -> None:
    assert await migration_differences(database_url, offers_table.metadata) == []
