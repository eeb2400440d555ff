"""A payer's own SQLite file: made on first use with the standard library's `sqlite3` (not a service's
database, so no migrations), versioned by `PRAGMA user_version`, and written only in `BEGIN IMMEDIATE`
transactions, which SQLite's file lock serializes across processes. Amounts are kept as decimal strings,
since uint256 amounts pass SQLite's 64-bit integers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Final

__all__ = ["connect", "prepare", "transaction"]

_BUSY_TIMEOUT_S: Final = 10.0
"""How long a payer waits for another's transaction on the same file."""


def connect(path: Path) -> sqlite3.Connection:
    """A connection to `path` in autocommit mode: each transaction is begun and ended explicitly."""
    return sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)


@contextmanager
def transaction(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection inside `BEGIN IMMEDIATE` (the file's write lock from the first read), committed when the
    block ends, rolled back when it raises."""
    with closing(connect(path)) as db:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


def prepare(
    path: Path, what: str, version: int, upgrade: Callable[[sqlite3.Connection, int], object]
) -> None:
    """Make `path` a file of `version`: `upgrade` gets the version found (0 for a new file) and brings the
    tables up to date, in the same transaction.

    Raises:
        ValueError: `path` cannot be opened or made as such a file, or a newer payer made it.
    """
    try:
        with transaction(path) as db:
            found = int(db.execute("PRAGMA user_version").fetchone()[0])
            if found > version:
                raise ValueError(f"{what} {path} was made by a newer version of the payer")
            upgrade(db, found)
            db.execute(f"PRAGMA user_version = {version}")
    except sqlite3.Error as exc:
        raise ValueError(f"{what} {path} cannot be used: {exc}") from None
