"""Ledger fixtures: an engine on each backend whose books are audited after every test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from merchant.ledger import Ledger, check_invariants
from storage import create_engine

from .bookings import RecordingSink


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on a fresh migrated database (SQLite and PostgreSQL); Σdebits == Σcredits checked after."""
    engine = create_engine(database_url)
    try:
        yield engine
        await check_invariants(engine)
    finally:
        await engine.dispose()


@pytest.fixture
def sink() -> RecordingSink:
    """The event sink the `ledger` fixture publishes to."""
    return RecordingSink()


@pytest.fixture
def ledger(engine: AsyncEngine, sink: RecordingSink) -> Ledger:
    """A ledger on `engine` publishing to `sink`."""
    return Ledger(engine, sink)
