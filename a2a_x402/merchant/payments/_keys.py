"""The idempotency keys the merchant settles under: `a2a-task:` and an HMAC of the task and its round.

The key of a settlement is what the facilitator answers a retry from, so it must not be guessable: with the
task id alone (it is public to the task's client, and in every URL of the task) a caller of the same
facilitator could claim the key first. The HMAC's secret is generated once per deployment and stored in the
merchant's database, so every replica (and every restart) derives the same key for the same task.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write

__all__ = ["SettlementKeys", "secrets_table"]

metadata = sa.MetaData()

secrets_table = sa.Table(
    "deployment_secrets",
    metadata,
    sa.Column("name", sa.String(40), primary_key=True),
    sa.Column("value", sa.String(128), nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
)

_NAME = "settlement-keys"


class SettlementKeys:
    """Derives each offer's settlement idempotency key from the deployment's secret (read once)."""

    def __init__(self, engine: AsyncEngine):
        self._engine = engine
        self._secret: bytes | None = None
        self._lock = asyncio.Lock()

    async def key(self, task_id: str, round_: int) -> str:
        """The idempotency key of the settlement of `task_id`'s payment in round `round_`."""
        secret = self._secret or await self._load()
        digest = hmac.new(secret, f"{task_id}:{round_}".encode(), hashlib.sha256).hexdigest()
        return f"a2a-task:{digest}"

    async def _load(self) -> bytes:
        """The deployment's secret, made by the first process that asks (replicas racing keep one)."""
        async with self._lock:
            if self._secret is None:
                insert = postgresql.insert if self._engine.dialect.name == "postgresql" else sqlite.insert
                statement = insert(secrets_table).on_conflict_do_nothing()
                values = {"name": _NAME, "value": secrets.token_hex(32), "created_at": datetime.now(UTC)}
                query = sa.select(secrets_table.c.value).where(secrets_table.c.name == _NAME)

                def operation(connection: sa.Connection) -> str:
                    connection.execute(statement, values)
                    return str(connection.execute(query).scalar_one())

                self._secret = bytes.fromhex(await write(self._engine, operation, isolated=True))
            return self._secret
