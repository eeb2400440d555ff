"""The per-database sequence that orders ledger facts and webhook events in commit order."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ._models import LedgerSequence

__all__ = ["allocate_sequence"]


async def allocate_sequence(connection: AsyncConnection) -> int:
    """Take the next sequence number inside the caller's transaction (no commit).

    The counter is one row, so the increment locks it until the transaction ends: every transaction that
    takes a number commits before the next one can take the following number. Numbers therefore appear in
    commit order with no gaps (a rollback returns its number), which lets a reader that has seen sequence N
    resume with "everything after N" and miss nothing. The price is that ledger writes are serialized per
    database; keep the rest of such a transaction short. On SQLite the UPDATE also takes the database's
    write lock at once, so a transaction that starts with it never hits a stale-snapshot conflict.
    """
    return int((await connection.execute(_NEXT)).scalar_one())


# Built once: building a statement (and its cache key) per call cost more than running it.
_NEXT = (
    sa.update(LedgerSequence)
    .where(LedgerSequence.id == 1)
    .values(value=LedgerSequence.value + 1)
    .returning(LedgerSequence.value)
)
