"""Fixtures shared by the merchant's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import check_invariants
from a2a_x402.storage import create_engine


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on a fresh migrated database (SQLite and PostgreSQL); the ledger is audited after."""
    engine = create_engine(database_url)
    try:
        yield engine
        await check_invariants(engine)
    finally:
        await engine.dispose()
