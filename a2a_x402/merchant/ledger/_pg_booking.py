"""A settlement's booking on PostgreSQL in one statement under the ledger sequence's lock.

The booking takes the sequence's row lock (`allocate_sequence`), and every booking and webhook event of the
database waits for it until the transaction commits; statement by statement the booking held it through
eight round trips, each waiting for a busy event loop to send the next, and at 32 concurrent paid tasks
a quarter of the transactions were queued on it at any time. Here the sequence, the entry, its unfinalized
row, both accounts' totals and both lines are one statement of data-modifying CTEs, each taking its input
from the one before (so the sequence is locked before the accounts, as in every other ledger write); only
the event, which carries the sequence in its exact bytes, follows it.

The accounts must exist before (`ensure_accounts`, before the sequence is taken): rows inserted by one CTE
are invisible to the others. Their totals move by the amount on the row as it stands once its lock is
held, which is how the statement-by-statement booking computed them too; a settlement only raises both
balances, so no line can go negative.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

from ._ids import new_id
from ._models import LedgerAccount, LedgerEntry
from ._records import BookedEntry

__all__ = ["book_in_one_statement", "ensure_accounts"]

_entries = cast(sa.Table, LedgerEntry.__table__)
_accounts = cast(sa.Table, LedgerAccount.__table__)
_ENTRY_COLUMNS = [column for column in _entries.c if column.name != "sequence"]


def _cast(name: str, column: sa.Column[Any], dialect: Dialect) -> str:
    return f"CAST(:{name} AS {column.type.compile(dialect=dialect)})"


@functools.cache
def _statement() -> sa.TextClause:
    """The booking's statement, built once (its casts name PostgreSQL's types for the columns)."""
    dialect: Dialect = postgresql.asyncpg.dialect()  # type: ignore[no-untyped-call]
    amount = _cast("amount", _accounts.c.debits_posted, dialect)
    entry_columns = ", ".join(column.name for column in _ENTRY_COLUMNS)
    entry_values = ", ".join(_cast(f"e_{column.name}", column, dialect) for column in _ENTRY_COLUMNS)
    # Only the tables' own column names and types are formatted in: every value is a bound parameter.
    sql = f"""WITH seq AS (
    UPDATE ledger_sequence SET value = value + 1 WHERE id = 1 RETURNING value
), entry AS (
    INSERT INTO ledger_entries ({entry_columns}, sequence)
    SELECT {entry_values}, seq.value FROM seq
    RETURNING id, sequence
), unfinalized AS (
    INSERT INTO ledger_unfinalized (entry_id, sequence) SELECT id, sequence FROM entry
), account AS (
    UPDATE ledger_accounts
    SET debits_posted = debits_posted + CASE WHEN kind = 'payer' THEN {amount} ELSE 0 END,
        credits_posted = credits_posted + CASE WHEN kind = 'revenue' THEN {amount} ELSE 0 END
    FROM entry
    WHERE tenant = :tenant AND network = :network AND asset = :asset
      AND ((kind = 'payer' AND holder = :payer) OR (kind = 'revenue' AND holder = ''))
    RETURNING ledger_accounts.id, kind, normal_side, debits_posted, credits_posted, entry.id AS entry_id
), line AS (
    INSERT INTO ledger_lines (id, entry_id, account_id, direction, amount, balance_after)
    SELECT CASE WHEN kind = 'payer' THEN :debit_line ELSE :credit_line END, entry_id, id,
           CASE WHEN kind = 'payer' THEN 'debit' ELSE 'credit' END, {amount},
           CASE WHEN normal_side = 'credit' THEN credits_posted - debits_posted
                ELSE debits_posted - credits_posted END
    FROM account
    RETURNING account_id
)
SELECT (SELECT sequence FROM entry) AS sequence, (SELECT count(*) FROM line) AS lines
"""  # noqa: S608
    return sa.text(sql).bindparams(
        *(sa.bindparam(f"e_{column.name}", type_=column.type) for column in _ENTRY_COLUMNS),
        sa.bindparam("amount", type_=_accounts.c.debits_posted.type),
    )


_ACCOUNT_COLUMNS = [column.name for column in _accounts.c]
_ACCOUNT_KEY = ("tenant", "network", "asset", "kind", "holder")
# Inserted only when no committed row has the key: an ON CONFLICT check alone would wait for the booking
# holding the sequence, which is updating that row's totals (every booking of the tenant moves its revenue
# account), before the sequence is even asked for.
_ENSURE_ACCOUNTS = (
    postgresql.insert(_accounts)
    .from_select(
        _ACCOUNT_COLUMNS,
        sa.select(
            *(sa.bindparam(f"a_{name}", type_=_accounts.c[name].type) for name in _ACCOUNT_COLUMNS)
        ).where(
            ~sa.exists().where(
                *(
                    _accounts.c[name] == sa.bindparam(f"a_{name}", type_=_accounts.c[name].type)
                    for name in _ACCOUNT_KEY
                )
            )
        ),
    )
    .on_conflict_do_nothing(index_elements=list(_ACCOUNT_KEY))
)


async def ensure_accounts(connection: AsyncConnection, entry: BookedEntry, now: datetime) -> None:
    """Create the entry's payer and revenue accounts where missing (no lock on existing ones)."""
    key = {"tenant": entry.tenant, "network": entry.network, "asset": entry.asset}
    fresh = {"debits_posted": 0, "credits_posted": 0, "created_at": now}
    accounts = [
        {
            **key,
            **fresh,
            "id": new_id("acct"),
            "kind": "payer",
            "holder": entry.payer,
            "normal_side": "debit",
        },
        {
            **key,
            **fresh,
            "id": new_id("acct"),
            "kind": "revenue",
            "holder": "",
            "normal_side": "credit",
        },
    ]
    await connection.execute(
        _ENSURE_ACCOUNTS, [{f"a_{name}": value for name, value in account.items()} for account in accounts]
    )


async def book_in_one_statement(connection: AsyncConnection, entry: BookedEntry) -> tuple[int, int]:
    """Take the next sequence and write `entry` (its own sequence ignored) with its unfinalized row, lines and
    account totals; return (the sequence taken, the lines written). No commit.

    Raises:
        sqlalchemy.exc.IntegrityError: the authorization is already booked (the entry's unique index).
    """
    values: dict[str, Any] = {f"e_{column.name}": getattr(entry, column.name) for column in _ENTRY_COLUMNS}
    values["e_kind"] = entry.kind.value
    values.update(
        amount=entry.amount,
        tenant=entry.tenant,
        network=entry.network,
        asset=entry.asset,
        payer=entry.payer,
        debit_line=new_id("jl"),
        credit_line=new_id("jl"),
    )
    row = (await connection.execute(_statement(), values)).one()
    return int(row.sequence), int(row.lines)
