"""Fixtures shared by the merchant's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import check_invariants
from a2a_x402.storage import create_engine
from tests.agentcard.conftest import KeyServer as KeyServer

# The agentcard tests' JWK Set servers on 127.0.0.1, plain and TLS, serve the AP2 issuer sources here too.
from tests.agentcard.conftest import (  # noqa: F401
    _Certificate,
    _http_key_server,
    _tls,
    http_client,
    key_server,
    tls_client,
    tls_key_server,
)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on a fresh migrated database (SQLite and PostgreSQL); the ledger is audited after."""
    engine = create_engine(database_url)
    try:
        yield engine
        await check_invariants(engine)
    finally:
        await engine.dispose()


@pytest.fixture
def tls_ca_file(_tls: tuple[KeyServer, _Certificate]) -> Path:  # noqa: F811 (the fixture, by name)
    """The certificate `tls_key_server` serves, for a client (`SSL_CERT_FILE`) to trust it and only it."""
    return _tls[1].cert_path
