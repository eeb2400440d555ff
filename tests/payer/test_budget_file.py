"""The `upto` day counts in a SQLite file (`_budget_file`): shared by every policy and process naming the
file, kept across a restart, released amounts given back; processes reserving at once never pass the cap
together; a file that cannot be used is a clear `ValueError` at once (the CLI: one line, exit 2), and one
that breaks later refuses the payment rather than sign uncounted."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest

from a2a_x402.payer import PaymentPolicy, UptoDayCapUnavailableError
from a2a_x402.payer._budget import Reservation
from a2a_x402.payer._budget_file import UptoDaysFile
from tests.fixtures.commands import run_command
from tests.fixtures.deadlines import HANG_S

NETWORK = "eip155:31337"
ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
OTHER_ASSET = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
# Each process tries this many reservations of 1 under a cap of `_CAP`: together they try more than fits.
_PROCESSES, _TRIES, _CAP = 4, 40, 100
_RESERVING = """
import sys
from a2a_x402.payer._budget import Reservation
from a2a_x402.payer._budget_file import UptoDaysFile

days = UptoDaysFile(sys.argv[1])
print(sum(isinstance(days.reserve(sys.argv[2], sys.argv[3], 1, int(sys.argv[4])), Reservation)
          for _ in range(int(sys.argv[5]))))
"""


def test_the_days_count_is_shared_kept_across_a_restart_and_given_back(tmp_path: Path) -> None:
    path = tmp_path / "days.sqlite"
    one, two = UptoDaysFile(path), UptoDaysFile(path)

    first = one.reserve(NETWORK, ASSET, 60, 100)
    refused = two.reserve(NETWORK, ASSET, 50, 100)  # another process: 60 already counted
    other = two.reserve(NETWORK, OTHER_ASSET, 50, 100)  # each asset its own count
    restarted = UptoDaysFile(path)
    counted = restarted.spent(NETWORK, ASSET)
    assert isinstance(first, Reservation)
    first.release()
    first.release()  # once only

    assert refused == 60 and isinstance(other, Reservation)
    assert counted == 60
    assert (one.spent(NETWORK, ASSET), two.spent(NETWORK, OTHER_ASSET)) == (0, 50)
    assert isinstance(restarted.reserve(NETWORK, ASSET, 100, 100), Reservation)


async def test_processes_reserving_at_once_never_pass_the_cap_together(tmp_path: Path) -> None:
    path = tmp_path / "days.sqlite"
    UptoDaysFile(path)
    argv = [str(path), NETWORK, ASSET, str(_CAP), str(_TRIES)]
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _RESERVING, *argv, stdout=asyncio.subprocess.PIPE, cwd=Path.cwd()
        )
        for _ in range(_PROCESSES)
    ]
    outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in processes)), HANG_S)

    assert [p.returncode for p in processes] == [0] * _PROCESSES
    assert sum(int(out) for out, _err in outputs) == _CAP  # 160 tried, exactly the cap counted
    assert UptoDaysFile(path).spent(NETWORK, ASSET) == _CAP


def test_a_policy_counts_in_its_file(tmp_path: Path) -> None:
    path = tmp_path / "days.sqlite"
    PaymentPolicy(upto_max_per_day_atomic=100, upto_days_file=path)
    UptoDaysFile(path).reserve(NETWORK, ASSET, 40, None)

    assert PaymentPolicy(upto_days_file=str(path)).upto_spent_today(NETWORK, ASSET) == 40
    assert PaymentPolicy().upto_spent_today(NETWORK, ASSET) == 0  # in memory: a count of its own


def test_a_file_that_cannot_be_used_is_refused_at_once(tmp_path: Path) -> None:
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("these are not the counts you are looking for, " * 40)

    with pytest.raises(ValueError, match="cannot be used: unable to open database file"):
        PaymentPolicy(upto_days_file=tmp_path / "missing" / "days.sqlite")
    with pytest.raises(ValueError, match="cannot be used: file is not a database"):
        UptoDaysFile(not_sqlite)
    newer = tmp_path / "newer.sqlite"
    UptoDaysFile(newer)
    with closing(sqlite3.connect(newer)) as db:
        db.execute("PRAGMA user_version = 2")
    with pytest.raises(ValueError, match="made by a newer version of the payer"):
        UptoDaysFile(newer)


def test_a_file_that_breaks_later_refuses_rather_than_sign_uncounted(tmp_path: Path) -> None:
    path = tmp_path / "days.sqlite"
    days = UptoDaysFile(path)
    path.write_bytes(b"overwritten by something else entirely" * 100)

    with pytest.raises(UptoDayCapUnavailableError, match=f"its file {path} could not be used") as refused:
        days.reserve(NETWORK, ASSET, 1, 10)

    assert (refused.value.code, refused.value.signed) == ("upto_day_cap_unavailable", False)


async def test_the_cli_answers_an_unusable_file_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "days.sqlite"
    answer = await run_command(
        [
            "x402-pay",
            "--card-url",
            "http://127.0.0.1:9",
            "--key",
            "0x" + "11" * 32,
            "--upto-days-file",
            str(missing),
            "hello",
        ],
        cwd=tmp_path,
    )

    assert answer.returncode == 2
    assert answer.stderr.strip().splitlines() == [
        f"x402-pay: upto days file {missing} cannot be used: unable to open database file"
    ]
