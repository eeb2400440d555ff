"""The payer's record of its uses of open payment mandates: in memory, or in a SQLite file that every
payer naming it shares (a budget two processes cannot both pass), kept across restarts."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from a2a_x402.payer import MandateConstraintError, MandateUsageFile, MandateUsageMemory
from a2a_x402.payer._ap2_usage import MandateSpend, MandateUsage, usage_key

KEY = "open-mandate-hash"
BUDGET = 30


def within(budget: int) -> Callable[[MandateSpend], None]:
    def check(spent: MandateSpend) -> None:
        if spent.total + 10 > budget:
            raise MandateConstraintError("payment.budget", f"{spent.total} spent")

    return check


@pytest.fixture(params=["memory", "file"])
def usage(request: pytest.FixtureRequest, tmp_path: Path) -> MandateUsage:
    return MandateUsageMemory() if request.param == "memory" else MandateUsageFile(tmp_path / "uses.db")


def test_uses_count_until_released_and_confirmed_ones_stay(usage: MandateUsage) -> None:
    first = usage.reserve(KEY, 10, within(BUDGET))
    second = usage.reserve(KEY, 10, within(BUDGET))
    assert usage.spent(KEY) == MandateSpend(20, 2) and usage.spent("other") == MandateSpend()
    first.confirm()
    second.release()
    second.release()  # once only
    assert usage.spent(KEY) == MandateSpend(10, 1)
    assert not first.open and not second.open


def test_a_refused_check_counts_nothing(usage: MandateUsage) -> None:
    for _ in range(3):
        usage.reserve(KEY, 10, within(BUDGET))
    with pytest.raises(MandateConstraintError, match="30 spent"):
        usage.reserve(KEY, 10, within(BUDGET))
    assert usage.spent(KEY) == MandateSpend(30, 3)


def test_a_file_is_shared_by_every_record_naming_it_and_outlives_them(tmp_path: Path) -> None:
    path = tmp_path / "uses.db"
    one, two = MandateUsageFile(path), MandateUsageFile(path)
    one.reserve(KEY, 10, within(BUDGET))
    two.reserve(KEY, 10, within(BUDGET))
    assert MandateUsageFile(path).spent(KEY) == MandateSpend(20, 2)


def test_racing_reservations_never_pass_the_budget_together(tmp_path: Path) -> None:
    path = tmp_path / "uses.db"
    records = [MandateUsageFile(path) for _ in range(8)]
    passed: list[bool] = []

    def reserve(record: MandateUsageFile) -> None:
        try:
            record.reserve(KEY, 10, within(BUDGET))
            passed.append(True)
        except MandateConstraintError:
            passed.append(False)

    threads = [threading.Thread(target=reserve, args=(record,)) for record in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert passed.count(True) == 3 and MandateUsageFile(path).spent(KEY) == MandateSpend(30, 3)


def test_a_file_that_cannot_be_used_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be used"):
        MandateUsageFile(tmp_path / "missing" / "uses.db")
    (tmp_path / "not-sqlite").write_text("hello, this is not a database file at all\n" * 10)
    with pytest.raises(ValueError, match="cannot be used"):
        MandateUsageFile(tmp_path / "not-sqlite")


def test_uint256_amounts_are_counted_exactly(usage: MandateUsage) -> None:
    # A merchant names the amount: one past SQLite's 64-bit integers is counted, not a crash or a lost use.
    huge = 2**255 + 1
    usage.reserve(KEY, huge, lambda _: None).confirm()
    usage.reserve(KEY, huge, lambda _: None)
    assert usage.spent(KEY) == MandateSpend(2 * huge, 2)


def test_a_file_of_the_first_version_is_upgraded_with_its_uses(tmp_path: Path) -> None:
    path = tmp_path / "uses.db"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "CREATE TABLE mandate_uses (mandate TEXT NOT NULL, use_id TEXT NOT NULL, amount INTEGER NOT NULL,"
            " state TEXT NOT NULL, PRIMARY KEY (mandate, use_id))"
        )
        db.executemany(
            "INSERT INTO mandate_uses VALUES (?, ?, ?, ?)",
            [(KEY, "a", 10, "confirmed"), (KEY, "b", 2**62, "reserved")],
        )
        db.execute("PRAGMA user_version = 1")
    record = MandateUsageFile(path)
    assert record.spent(KEY) == MandateSpend(10 + 2**62, 2)
    record.reserve(KEY, 2**62, lambda _: None)
    assert MandateUsageFile(path).spent(KEY) == MandateSpend(10 + 2**63, 3)


def test_a_file_of_a_newer_payer_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "uses.db"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(ValueError, match="newer version of the payer"):
        MandateUsageFile(path)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 99


def test_the_key_is_the_issuer_signed_jwt_whatever_is_disclosed() -> None:
    assert usage_key("a.b.c~d1~d2~") == usage_key("a.b.c~d2~") != usage_key("a.b.x~d1~")
