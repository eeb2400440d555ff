"""The payer's own record of what it presented under each open AP2 payment mandate (§20.4, §20.5).

The user's open payment mandate may carry a budget and a limit on how often the agent may use it. The
merchant counts its own record; the payer keeps one too, so that a payment past the budget is refused
before anything is signed or sent. Both key the record by the hash of the open mandate's issuer-signed JWT
(``usage_key``), which does not change with the disclosures presented.

A use is counted from the moment it is reserved, just before the closed mandates are signed, and counts
until it is released: the merchant refused the mandates, or the round ended with nothing settled (an error
receipt, a failed task, fresh terms). A use whose outcome the payer never learns stays counted, erring on
the safe side. Reserving checks and counts under one lock (in memory, ``MandateUsageMemory``) or in one
transaction holding a SQLite file's lock (``MandateUsageFile``, a ``_sqlite_file`` as the ``upto`` maxima's
file is), so concurrent payments cannot both pass a budget only one fits under.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from a2a_x402.extension import ap2_digest

from ._errors import MandateConstraintError
from ._sqlite_file import connect, prepare, transaction

__all__ = [
    "MandateSpend",
    "MandateUsage",
    "MandateUsageFile",
    "MandateUsageMemory",
    "MandateUse",
    "usage_key",
]

logger = logging.getLogger(__name__)

_VERSION: Final = 2
"""2: amounts as decimal strings (1 kept them as SQLite integers, which a total past 2**63 overflowed)."""
_TABLE: Final = """
CREATE TABLE mandate_uses (
    mandate TEXT NOT NULL,
    use_id TEXT NOT NULL,
    amount TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (mandate, use_id)
)
"""


def usage_key(open_payment_mandate: str) -> str:
    """The key of an open payment mandate's record: the hash of its issuer-signed JWT."""
    return ap2_digest(open_payment_mandate.split("~", 1)[0])


@dataclass(frozen=True, slots=True)
class MandateSpend:
    """What counts under one open payment mandate: the sum of its uses' amounts (minor units of its
    currency) and their number."""

    total: int = 0
    uses: int = 0


class MandateUsage(Protocol):
    """Where the payer counts its uses of open payment mandates."""

    scope: str
    """Whose record this is, for a refusal's words."""

    def spent(self, key: str) -> MandateSpend:
        """What counts under the open mandate ``key`` now."""

    def reserve(self, key: str, amount: int, check: Callable[[MandateSpend], None]) -> MandateUse:
        """Run ``check`` on what counts now, and when it passes, count one more use of ``amount``.

        Raises:
            MandateConstraintError: ``check`` refused (nothing counted), or the record is unusable.
        """

    def resolve(self, key: str, use_id: str, *, settled: bool) -> None:
        """Mark a use confirmed (``settled``), or take it back."""


class MandateUse:
    """One counted use; ``confirm`` or ``release`` it (once) when the round's outcome is known."""

    def __init__(self, usage: MandateUsage, key: str, amount: int) -> None:
        self._usage: MandateUsage | None = usage
        self.key = key
        self.amount = amount
        self.use_id = uuid.uuid4().hex

    @property
    def open(self) -> bool:
        """Whether the use is still only reserved."""
        return self._usage is not None

    def confirm(self) -> None:
        """The payment was settled: the use stays counted for good."""
        self._resolve(settled=True)

    def release(self) -> None:
        """Nothing was settled under it: the budget gets the amount back."""
        self._resolve(settled=False)

    def _resolve(self, *, settled: bool) -> None:
        if self._usage is not None:
            usage, self._usage = self._usage, None
            usage.resolve(self.key, self.use_id, settled=settled)


class MandateUsageMemory:
    """The uses of each open payment mandate, in this object (so per process)."""

    scope = "by this process"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uses: dict[str, dict[str, int]] = {}

    def spent(self, key: str) -> MandateSpend:
        """What counts under the open mandate ``key`` now."""
        with self._lock:
            uses = self._uses.get(key, {})
            return MandateSpend(sum(uses.values()), len(uses))

    def reserve(self, key: str, amount: int, check: Callable[[MandateSpend], None]) -> MandateUse:
        """Run ``check`` on what counts now and count one more use of ``amount`` when it passes."""
        with self._lock:
            uses = self._uses.setdefault(key, {})
            check(MandateSpend(sum(uses.values()), len(uses)))
            use = MandateUse(self, key, amount)
            uses[use.use_id] = amount
        return use

    def resolve(self, key: str, use_id: str, *, settled: bool) -> None:
        """Keep a settled use; take back one that was not."""
        if not settled:
            with self._lock:
                self._uses.get(key, {}).pop(use_id, None)


class MandateUsageFile:
    """The uses of each open payment mandate in the SQLite file ``path``, shared by every payer naming it.

    Raises:
        ValueError: ``path`` cannot be opened or made as such a file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.scope = f"as counted in {self.path}"
        prepare(self.path, "mandate usage file", _VERSION, _upgrade)

    def spent(self, key: str) -> MandateSpend:
        """What counts under the open mandate ``key`` now.

        Raises:
            MandateConstraintError: the file could not be read.
        """
        try:
            with closing(connect(self.path)) as db:
                return _read(db, key)
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None

    def reserve(self, key: str, amount: int, check: Callable[[MandateSpend], None]) -> MandateUse:
        """Run ``check`` on what counts now and count one more use of ``amount`` when it passes, in one
        transaction holding the file's write lock."""
        try:
            with transaction(self.path) as db:
                check(_read(db, key))
                use = MandateUse(self, key, amount)
                db.execute(
                    "INSERT INTO mandate_uses (mandate, use_id, amount, state) VALUES (?, ?, ?, 'reserved')",
                    (key, use.use_id, str(amount)),
                )
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None
        return use

    def resolve(self, key: str, use_id: str, *, settled: bool) -> None:
        """Mark a use confirmed, or delete it. A file that cannot be written keeps the use counted, and a
        WARNING says so: the budget then errs on the safe side."""
        try:
            with transaction(self.path) as db:
                if settled:
                    db.execute(
                        "UPDATE mandate_uses SET state = 'confirmed' WHERE mandate = ? AND use_id = ?",
                        (key, use_id),
                    )
                else:
                    db.execute("DELETE FROM mandate_uses WHERE mandate = ? AND use_id = ?", (key, use_id))
        except sqlite3.Error as exc:
            logger.warning("mandate usage file %s: a use stays %s: %s", self.path, "reserved", exc)

    def _unavailable(self, exc: sqlite3.Error) -> MandateConstraintError:
        return MandateConstraintError(
            "usage", f"the mandates' usage record {self.path} could not be used ({exc})"
        )


def _read(db: sqlite3.Connection, key: str) -> MandateSpend:
    amounts = [int(row[0]) for row in db.execute("SELECT amount FROM mandate_uses WHERE mandate = ?", (key,))]
    return MandateSpend(sum(amounts), len(amounts))


def _upgrade(db: sqlite3.Connection, found: int) -> None:
    if found == 0:
        db.execute(_TABLE)
    elif found == 1:
        db.execute("ALTER TABLE mandate_uses RENAME TO mandate_uses_v1")
        db.execute(_TABLE)
        db.execute(
            "INSERT INTO mandate_uses "
            "SELECT mandate, use_id, CAST(amount AS TEXT), state FROM mandate_uses_v1"
        )
        db.execute("DROP TABLE mandate_uses_v1")
