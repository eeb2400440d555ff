"""Dashboard sessions as server records (`dashboard_sessions`, migration m0008).

A session's cookie is a random id (32 bytes, URL-safe); the row is keyed by its SHA-256, so a copy of the
table opens nothing. The row names its tenant and holds an HMAC of the tenant's API token keyed with the
session id: a session is valid while its row is unrevoked and unexpired and the tenant's token is still
the one it was opened with. Log-in opens a new row (and revokes the one the browser still had, so a
session id is never carried across a log-in); log-out revokes it. Expired and revoked rows are deleted
at log-ins, so the table holds about one row per signed-in browser.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write

__all__ = ["SessionStore"]

_SESSIONS = sa.Table(
    "dashboard_sessions",
    sa.MetaData(),
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("token_mac", sa.String(64), nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("expires_at", UtcDateTime(), nullable=False),
    sa.Column("revoked_at", UtcDateTime(), nullable=True),
)
_MAX_ID_LENGTH = 128  # a longer cookie is no id of ours; it is refused before hashing


def _id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _token_mac(session_id: str, token: str) -> str:
    return hmac.new(
        session_id.encode(), b"x402-dashboard-session\n" + token.encode(), hashlib.sha256
    ).hexdigest()


class SessionStore:
    """Opens, checks and revokes sessions in `engine`'s `dashboard_sessions`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def open(
        self,
        tenant: str,
        token: str,
        *,
        ttl_s: int,
        replacing: str | None = None,
        now: datetime | None = None,
    ) -> str:
        """A new session id for `tenant` (whose API token is `token`), valid for `ttl_s` seconds; the
        session `replacing` (the one the browser presented, if any) is revoked in the same transaction."""
        now = datetime.now(UTC) if now is None else now
        session_id = secrets.token_urlsafe(32)
        row = {
            "id_hash": _id_hash(session_id),
            "tenant": tenant,
            "token_mac": _token_mac(session_id, token),
            "created_at": now,
            "expires_at": now + timedelta(seconds=ttl_s),
            "revoked_at": None,
        }

        def insert(connection: Connection) -> None:
            connection.execute(
                sa.delete(_SESSIONS).where(
                    sa.or_(_SESSIONS.c.expires_at <= now, _SESSIONS.c.revoked_at.is_not(None))
                )
            )
            if replacing and len(replacing) <= _MAX_ID_LENGTH:
                _revoke(connection, _id_hash(replacing), now)
            connection.execute(sa.insert(_SESSIONS).values(row))

        await write(self._engine, insert)
        return session_id

    async def valid(
        self, tenant: str, session_id: str | None, token: str, *, now: datetime | None = None
    ) -> bool:
        """Whether `session_id` is an open, unexpired session of `tenant` opened with its token `token`."""
        if not session_id or len(session_id) > _MAX_ID_LENGTH:
            return False
        now = datetime.now(UTC) if now is None else now
        async with self._engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(_SESSIONS.c.tenant, _SESSIONS.c.token_mac).where(
                        _SESSIONS.c.id_hash == _id_hash(session_id),
                        _SESSIONS.c.revoked_at.is_(None),
                        _SESSIONS.c.expires_at > now,
                    )
                )
            ).first()
        if row is None:
            return False
        mac_matches = hmac.compare_digest(row.token_mac.encode(), _token_mac(session_id, token).encode())
        return bool(row.tenant == tenant and mac_matches)

    async def revoke(self, session_id: str | None, *, now: datetime | None = None) -> None:
        """End the session `session_id` (nothing happens for an unknown or ended one)."""
        if not session_id or len(session_id) > _MAX_ID_LENGTH:
            return
        id_hash = _id_hash(session_id)
        when = datetime.now(UTC) if now is None else now
        await write(self._engine, lambda connection: _revoke(connection, id_hash, when))


def _revoke(connection: Connection, id_hash: str, now: datetime) -> None:
    connection.execute(
        sa.update(_SESSIONS)
        .where(_SESSIONS.c.id_hash == id_hash, _SESSIONS.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
