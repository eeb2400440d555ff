"""Everything a request could change, captured whole, to prove that a refused request changed nothing.

A `Snapshot` holds every row of every table in the database the merchant and its in-process facilitator
write (read straight from the SQLite file, so no engine or event loop is involved; tables a later
migration adds are included without a change here) and the chain state a settlement
would move: the relayer's transaction count and the token balances of the payees. `changes(before, after)`
names what differs, per table, by primary key, so a failure says which row of which table moved.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eth_account import Account

from a2a_x402.devchain import DevChain
from tests.fixtures.deadlines import HANG_S

__all__ = ["TASK_TABLES", "Snapshot", "changes", "take_snapshot", "wait_until_quiet"]

TASK_TABLES = ("tasks", "payment_offers", "payment_offer_callers")
"""What an accepted SendMessage may change: the task, its payment offer and who asked for it."""

_HEARTBEATS = {"relayer_leases": ("lease_until", "updated_at")}
"""Columns a running process rewrites on its own clock (a relayer lease's renewal), whatever it is asked:
left out, so a renewal between two snapshots is not taken for a request's change; who holds a lease counts."""
_BACKGROUND_TABLES = ("reconcile_chain",)
"""Tables a running merchant writes on its own clock, whatever it is asked (the reconciler's first pass
records the chain's genesis hash): left out, so that pass landing between two snapshots is not taken for a
request's change."""
Row = tuple[Any, ...]


@dataclass(frozen=True)
class Snapshot:
    """Rows by table (keyed by primary key) and the chain state a settlement moves."""

    rows: Mapping[str, Mapping[Row, Row]]
    relayer_nonce: int
    balances: Mapping[str, int] = field(default_factory=dict)


def _sqlite_path(database_url: str) -> str:
    prefix = "sqlite+aiosqlite:///"
    if not database_url.startswith(prefix):
        raise ValueError(f"not a SQLite URL: {database_url}")
    return database_url[len(prefix) :]


def _table_rows(connection: sqlite3.Connection, table: str) -> dict[Row, Row]:
    columns = connection.execute(f'PRAGMA table_info("{table}")').fetchall()
    kept = [column[0] for column in columns if column[1] not in _HEARTBEATS.get(table, ())]
    # PRAGMA table_info: (cid, name, type, notnull, default, pk); pk is the 1-based position in the key.
    key_positions = [column[0] for column in sorted(columns, key=lambda c: c[5]) if column[5]] or [
        column[0] for column in columns
    ]
    rows = connection.execute(f'SELECT * FROM "{table}"').fetchall()  # noqa: S608 - table names are ours
    return {tuple(row[i] for i in key_positions): tuple(row[i] for i in kept) for row in rows}


def take_snapshot(database_url: str, chain: DevChain, payees: Iterable[str] = ()) -> Snapshot:
    """Every row of every table in the SQLite database, the relayer nonce and `payees`' balances."""
    connection = sqlite3.connect(f"file:{_sqlite_path(database_url)}?mode=ro", uri=True, timeout=10)
    try:
        tables = [
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_") and name not in _BACKGROUND_TABLES
        ]
        rows = {table: _table_rows(connection, table) for table in tables}
    finally:
        connection.close()
    relayer = Account.from_key(chain.relayer_key).address
    nonce = int(chain.rpc.call("eth_getTransactionCount", [relayer, "latest"]), 16)
    return Snapshot(rows, nonce, {payee: chain.balance_of(payee) for payee in payees})


def changes(before: Snapshot, after: Snapshot) -> dict[str, dict[str, list[Row]]]:
    """What differs, per table: keys of rows `added`, `removed` and `changed`; plus `chain` if it moved."""
    found: dict[str, dict[str, list[Row]]] = {}
    for table in sorted(before.rows.keys() | after.rows.keys()):
        old, new = before.rows.get(table, {}), after.rows.get(table, {})
        table_changes = {
            "added": sorted(new.keys() - old.keys(), key=repr),
            "removed": sorted(old.keys() - new.keys(), key=repr),
            "changed": sorted((k for k in old.keys() & new.keys() if old[k] != new[k]), key=repr),
        }
        if any(table_changes.values()):
            found[table] = {name: keys for name, keys in table_changes.items() if keys}
    if (before.relayer_nonce, before.balances) != (after.relayer_nonce, after.balances):
        found["chain"] = {
            "changed": [
                (before.relayer_nonce, dict(before.balances)),
                (after.relayer_nonce, dict(after.balances)),
            ]
        }
    return found


def wait_until_quiet(
    database_url: str,
    chain: DevChain,
    payees: Iterable[str] = (),
    *,
    settle_s: float = 0.3,
    timeout_s: float = HANG_S,
) -> Snapshot:
    """The snapshot once nothing has changed for `settle_s` (work an answered request left running is done).

    Raises:
        TimeoutError: the state kept changing for `timeout_s`.
    """
    payees = tuple(payees)
    deadline = time.monotonic() + timeout_s
    previous = take_snapshot(database_url, chain, payees)
    while True:
        time.sleep(settle_s)
        current = take_snapshot(database_url, chain, payees)
        if not changes(previous, current):
            return current
        if time.monotonic() > deadline:
            raise TimeoutError(f"the merchant's state kept changing: {changes(previous, current)}")
        previous = current
