"""Presented authorizations: each (payer, nonce) belongs to the first task it was presented for.

A signed authorization presented for a task and then refused (insufficient funds, expired, a failed
verification), or left unused when the task was rejected or failed, stays valid on chain until it expires.
Whoever got hold of it must not be able to spend it on a task of their own (issue 24): the first
presentation of a (payer, nonce) is recorded, before anything is verified, and the primary key lets only
one task have it, even when two tasks race for it. The row is never changed or removed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write

from ._offer_table import metadata

__all__ = ["Presentations", "presentations_table"]

presentations_table = sa.Table(
    "payment_presentations",
    metadata,
    sa.Column("payer", sa.String(42), nullable=False),
    sa.Column("nonce", sa.String(66), nullable=False),
    sa.Column("task_id", sa.String(64), nullable=False),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("presented_at", UtcDateTime(), nullable=False),
    sa.PrimaryKeyConstraint("payer", "nonce", name="pk_payment_presentations"),
)

_OWNER = sa.select(presentations_table.c.task_id, presentations_table.c.tenant).where(
    presentations_table.c.payer == sa.bindparam("_payer"),
    presentations_table.c.nonce == sa.bindparam("_nonce"),
)


class Presentations:
    """Binds each presented authorization to one task, for good."""

    def __init__(self, engine: AsyncEngine):
        self._engine = engine
        insert = (postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert)(
            presentations_table
        )
        self._insert = insert.on_conflict_do_nothing(index_elements=["payer", "nonce"])

    async def present(
        self,
        *,
        payer: str,
        nonce: str,
        task_id: str,
        tenant: str,
        also: Callable[[sa.Connection], None] | None = None,
    ) -> tuple[str, str]:
        """Record that the authorization (payer, nonce) was presented for `task_id` of `tenant`, unless it
        was presented before: the (task id, tenant) it belongs to, this task's or the first task's it was
        presented for. One transaction; of two tasks presenting it at once, one gets it. `also` runs in
        it when the authorization is this task's; what it raises undoes the record and is raised here."""
        values = {
            "payer": payer,
            "nonce": nonce,
            "task_id": task_id,
            "tenant": tenant,
            "presented_at": datetime.now(UTC),
        }

        def operation(connection: sa.Connection) -> tuple[str, str]:
            connection.execute(self._insert, values)
            row = connection.execute(_OWNER, {"_payer": payer, "_nonce": nonce}).one()
            owner = str(row.task_id), str(row.tenant)
            if also is not None and owner == (task_id, tenant):
                also(connection)
            return owner

        return await write(self._engine, operation, isolated=True)

    async def owner(self, payer: str, nonce: str) -> tuple[str, str] | None:
        """The (task id, tenant) an authorization was presented for, if any."""
        async with self._engine.connect() as connection:
            row = (await connection.execute(_OWNER, {"_payer": payer, "_nonce": nonce})).first()
        return None if row is None else (str(row.task_id), str(row.tenant))
