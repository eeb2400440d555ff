"""Ledger fixtures: a ledger on the shared `engine` (each backend, books audited after every test)."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import Ledger

from .bookings import RecordingSink


@pytest.fixture
def sink() -> RecordingSink:
    """The event sink the `ledger` fixture publishes to."""
    return RecordingSink()


@pytest.fixture
def ledger(engine: AsyncEngine, sink: RecordingSink) -> Ledger:
    """A ledger on `engine` publishing to `sink`."""
    return Ledger(engine, sink)
