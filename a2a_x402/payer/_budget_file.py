"""The `upto` maxima of each UTC day counted in a SQLite file, so that a policy's cap per day holds across
restarts and for every process (or policy object) that names the same file.

The file is the payer's own (`_sqlite_file`), one row per (day, network, asset) holding the day's sum.
Reserving reads the day's sum and adds to it in one transaction holding the file's lock: two payers cannot
both pass a cap only one fits under. A file that cannot be read or written refuses the payment
(`UptoDayCapUnavailableError`) rather than sign uncounted. Rows of earlier days are deleted as the next
day's first maximum is counted.
"""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Final

from . import _budget
from ._budget import DayKey, Reservation
from ._errors import UptoDayCapUnavailableError
from ._sqlite_file import connect, prepare, transaction

__all__ = ["UptoDaysFile"]

logger = logging.getLogger(__name__)

_VERSION: Final = 1
_TABLE: Final = """
CREATE TABLE IF NOT EXISTS upto_days (
    day TEXT NOT NULL,
    network TEXT NOT NULL,
    asset TEXT NOT NULL,
    authorized TEXT NOT NULL,
    PRIMARY KEY (day, network, asset)
)
"""


class UptoDaysFile:
    """The sum of `upto` maxima authorized today (UTC) for each (network, asset), in the SQLite file `path`.

    Raises:
        ValueError: `path` cannot be opened or made as such a file (a missing folder, another file).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.scope = f"as counted in {self.path}"
        prepare(self.path, "upto days file", _VERSION, lambda db, _found: db.execute(_TABLE))

    def spent(self, network: str, asset: str) -> int:
        """What today's authorizations of `asset` on `network` add up to.

        Raises:
            UptoDayCapUnavailableError: the file could not be read.
        """
        try:
            with closing(connect(self.path)) as db:
                return _read(db, (_budget.today(), network, asset))
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None

    def reserve(self, network: str, asset: str, amount: int, cap: int | None) -> Reservation | int:
        """Count `amount` for today, or, when it would take the day over `cap`, return what is spent already
        (nothing counted).

        Raises:
            UptoDayCapUnavailableError: the file could not be read or written (nothing counted).
        """
        key = (_budget.today(), network, asset)
        try:
            with transaction(self.path) as db:
                spent = _read(db, key)
                if cap is not None and spent + amount > cap:
                    return spent
                db.execute("DELETE FROM upto_days WHERE day < ?", (key[0].isoformat(),))
                _write(db, key, spent + amount)
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None
        return Reservation(self, key, amount)

    def take_back(self, key: DayKey, amount: int) -> None:
        """Uncount `amount` of the day and asset of `key` (a reservation released). A file that cannot be
        written keeps the amount counted, and a WARNING says so: the day's cap then errs on the safe side."""
        try:
            with transaction(self.path) as db:
                _write(db, key, max(_read(db, key) - amount, 0))
        except sqlite3.Error as exc:
            logger.warning(
                "upto days file %s: %s of a maximum not signed stays counted: %s", self.path, amount, exc
            )

    def _unavailable(self, exc: sqlite3.Error) -> UptoDayCapUnavailableError:
        return UptoDayCapUnavailableError(
            f"the upto cap per day cannot be checked: its file {self.path} could not be used ({exc})"
        )


def _read(db: sqlite3.Connection, key: DayKey) -> int:
    row = db.execute(
        "SELECT authorized FROM upto_days WHERE day = ? AND network = ? AND asset = ?",
        (key[0].isoformat(), key[1], key[2]),
    ).fetchone()
    return int(row[0]) if row is not None else 0


def _write(db: sqlite3.Connection, key: DayKey, authorized: int) -> None:
    db.execute(
        "INSERT INTO upto_days (day, network, asset, authorized) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (day, network, asset) DO UPDATE SET authorized = excluded.authorized",
        (key[0].isoformat(), key[1], key[2], str(authorized)),
    )
