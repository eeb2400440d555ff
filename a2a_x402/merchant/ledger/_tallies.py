"""Per-payer totals of a tenant's settlements, summed and counted by the database (GROUP BY), exactly.

PostgreSQL sums the NUMERIC amounts exactly. SQLite stores a uint256 as zero-padded decimal text (the
`Uint256` type), which no SQL `SUM` adds exactly, so there each amount is cut into nine-digit pieces that
SQLite sums as 64-bit integers (a group would need a billion settlements to overflow one) and the pieces'
sums are put together here. SQLite ranks the groups by a float sum, exact below 2**53 atomic units; the
rows of a page are then ordered by their exact totals.
"""

from __future__ import annotations

from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ._models import LedgerEntry
from ._records import EntryKind, PayerTotal

__all__ = ["payer_count", "payer_totals"]

_entries = cast(sa.Table, LedgerEntry.__table__)
_reversals = _entries.alias("reversal")
_PIECE_DIGITS = 9
_PIECES = 9  # 81 digits: every digit of a uint256 (78)


def _standing(tenant: str) -> sa.Select[Any]:
    """The tenant's settlements that stand (not reversed), grouped by payer, network and asset."""
    return (
        sa.select(_entries.c.payer, _entries.c.network, _entries.c.asset)
        .select_from(_entries.outerjoin(_reversals, _reversals.c.reverses_entry_id == _entries.c.id))
        .where(
            _entries.c.tenant == tenant,
            _entries.c.kind == EntryKind.SETTLEMENT.value,
            _reversals.c.id.is_(None),
        )
        .group_by(_entries.c.payer, _entries.c.network, _entries.c.asset)
    )


async def payer_totals(connection: AsyncConnection, tenant: str, *, limit: int) -> list[PayerTotal]:
    """Per payer, network and asset: how many of the tenant's settlements stand, their exact sum and the
    last one's booking time; the `limit` largest totals, largest first (then by payer)."""
    amount = _entries.c.amount
    if connection.dialect.name == "sqlite":
        # substr from the end: piece k holds the digits 9k+1 to 9k+9 counted from the right.
        pieces = [
            sa.func.sum(
                sa.cast(sa.func.substr(amount, -_PIECE_DIGITS * (k + 1), _PIECE_DIGITS), sa.BigInteger)
            )
            for k in range(_PIECES)
        ]
        rank: sa.ColumnElement[Any] = sa.func.total(sa.cast(amount, sa.Float))
    else:
        pieces = [sa.func.sum(amount)]
        rank = pieces[0]
    statement = (
        _standing(tenant)
        .add_columns(
            sa.func.count().label("count"),
            sa.func.max(_entries.c.booked_at).label("last_seen"),
            *(piece.label(f"piece_{k}") for k, piece in enumerate(pieces)),
        )
        .order_by(rank.desc(), _entries.c.payer)
        .limit(limit)
    )
    totals = [
        PayerTotal(
            payer=row["payer"],
            network=row["network"],
            asset=row["asset"],
            count=int(row["count"]),
            total=sum(int(row[f"piece_{k}"] or 0) * 10 ** (_PIECE_DIGITS * k) for k in range(len(pieces))),
            last_seen=row["last_seen"],
        )
        for row in (await connection.execute(statement)).mappings()
    ]
    return sorted(totals, key=lambda payer: (-payer.total, payer.payer))


async def payer_count(connection: AsyncConnection, tenant: str) -> int:
    """How many (payer, network, asset) groups `payer_totals` has for the tenant, all of them."""
    grouped = _standing(tenant).subquery()
    return int((await connection.execute(sa.select(sa.func.count()).select_from(grouped))).scalar_one())
