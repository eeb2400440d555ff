"""Dashboard sessions: server records opened for one tenant's token, ended at log-out, at expiry, at a new
log-in and with the token; checked in constant time; nothing in the table opens a session."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.dashboard import DashboardAuth, SessionStore
from a2a_x402.storage import create_engine

NOW = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on a fresh migrated database, SQLite and PostgreSQL."""
    engine = create_engine(database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


def _auth(engine: AsyncEngine, tokens: dict[str, str]) -> DashboardAuth:
    return DashboardAuth(tokens.get, SessionStore(engine), session_ttl_s=3600)


async def test_a_session_is_valid_for_its_tenant_only_until_it_expires(engine: AsyncEngine) -> None:
    auth = _auth(engine, {"acme": "acme-token-0123456789", "globex": "globex-token-0123456789"})
    session = await auth.new_session("acme", now=NOW)

    assert await auth.session_matches("acme", session, now=NOW + timedelta(seconds=3599))
    assert not await auth.session_matches("acme", session, now=NOW + timedelta(seconds=3600))
    assert not await auth.session_matches("globex", session, now=NOW)
    assert "acme-token" not in session  # the cookie is not the token


async def test_log_out_ends_the_session_for_good_and_a_new_log_in_ends_the_previous_one(
    engine: AsyncEngine,
) -> None:
    auth = _auth(engine, {"acme": "acme-token-0123456789"})
    first = await auth.new_session("acme", now=NOW)
    second = await auth.new_session("acme", replacing=first, now=NOW)
    other_browser = await auth.new_session("acme", now=NOW)

    assert second != first and not await auth.session_matches("acme", first, now=NOW)
    await auth.end_session(second)
    assert not await auth.session_matches("acme", second, now=NOW)
    assert await auth.session_matches("acme", other_browser, now=NOW)  # another browser's stays open
    await auth.end_session(second)  # ending it again, or an unknown one, changes nothing
    await auth.end_session("x" * 10_000)
    await auth.end_session(None)
    assert await auth.session_matches("acme", other_browser, now=NOW)


async def test_a_new_token_ends_every_session_and_forged_values_fail(engine: AsyncEngine) -> None:
    tokens = {"acme": "acme-token-0123456789"}
    auth = _auth(engine, tokens)
    session = await auth.new_session("acme", now=NOW)
    forged = ["", "garbage", session[:-1], session + "A", session.upper(), "x" * 10_000]

    assert all([not await auth.session_matches("acme", value, now=NOW) for value in forged])
    tokens["acme"] = "a-rotated-token-0123456789"
    assert not await auth.session_matches("acme", session, now=NOW)


async def test_the_table_holds_neither_the_session_id_nor_the_token_and_drops_ended_rows(
    engine: AsyncEngine,
) -> None:
    token = secrets.token_urlsafe(24)
    auth = _auth(engine, {"acme": token})
    ended = await auth.new_session("acme", now=NOW)
    await auth.end_session(ended)
    expired = await auth.new_session("acme", now=NOW - timedelta(hours=2))
    live = await auth.new_session("acme", now=NOW)
    async with engine.connect() as connection:
        rows = (await connection.execute(sa.text("SELECT * FROM dashboard_sessions"))).all()

    assert len(rows) == 1  # the ended and the expired rows were deleted at the last log-in
    stored = repr(rows)
    assert all(value not in stored for value in (ended, expired, live, token))


async def test_tokens_match_exactly_and_a_tenant_without_one_has_no_way_in(engine: AsyncEngine) -> None:
    auth = _auth(engine, {"acme": "acme-token-0123456789"})

    assert auth.token_matches("acme", "acme-token-0123456789")
    assert not auth.token_matches("acme", "acme-token-012345678")
    assert not auth.token_matches("acme", None)
    assert not auth.token_matches("nobody", "acme-token-0123456789")
    assert not await auth.session_matches("nobody", "1.abc", now=NOW)
    with pytest.raises(ValueError, match="needs a tenant with an API token"):
        await auth.new_session("nobody")
