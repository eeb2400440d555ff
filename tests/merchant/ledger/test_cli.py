"""`ledger balance|statement|check` against a real SQLite database."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import AsyncIterator

import pytest
from click.testing import CliRunner, Result

from a2a_x402.merchant.ledger import Ledger, ledger_cli, statement_csv
from a2a_x402.storage import create_engine

from .bookings import EURC, USDC, RecordingSink, booking


async def _invoke(url: str, *args: str, env: dict[str, str] | None = None) -> Result:
    # The commands run their own event loop (asyncio.run), so they are invoked off this test's loop.
    runner = CliRunner()
    env = {"X402_DATABASE_URL": url, "X402_ASSET": "", **(env or {})}
    return await asyncio.to_thread(runner.invoke, ledger_cli, list(args), env=env)


@pytest.fixture
async def ledger(sqlite_url: str) -> AsyncIterator[Ledger]:
    """Books in `sqlite_url` with two assets for `acme` and one settlement for `globex`."""
    engine = create_engine(sqlite_url)
    ledger = Ledger(engine, RecordingSink())
    await ledger.book_settlement(booking(amount=1_500))
    await ledger.book_settlement(booking(amount=2**100, asset=EURC))
    await ledger.book_settlement(booking(amount=7, tenant="globex"))
    yield ledger
    await engine.dispose()


async def test_balance_as_json_and_table(sqlite_url: str, ledger: Ledger) -> None:
    as_json = await _invoke(sqlite_url, "balance", "--tenant", "acme", "--format", "json")
    table = await _invoke(sqlite_url, "balance", "--tenant", "acme", "--asset", EURC)

    assert as_json.exit_code == 0, as_json.output
    balances = {item["asset"]: item["balance"] for item in json.loads(as_json.output)["balances"]}
    assert balances == {USDC: "1500", EURC: str(2**100)}
    assert table.exit_code == 0, table.output
    # A token the settings do not describe has no display amount, only its atomic units.
    assert table.output.splitlines()[1].split() == ["eip155:84532", EURC, "—", str(2**100)]
    assert len(table.output.splitlines()) == 2


async def test_balance_table_writes_the_settings_token_for_people_beside_its_atomic_units(
    sqlite_url: str, ledger: Ledger
) -> None:
    env = {"X402_ASSET": USDC.lower(), "X402_ASSET_NAME": "USDC", "X402_ASSET_DECIMALS": "6"}
    table = await _invoke(sqlite_url, "balance", "--tenant", "acme", env=env)
    bigger = await _invoke(sqlite_url, "balance", "--tenant", "acme", env={**env, "X402_ASSET": EURC})

    assert table.exit_code == 0, table.output
    header, *rows = table.output.splitlines()
    assert header.split() == ["network", "asset", "balance", "atomic", "units"]
    assert {row.split()[1]: row.split()[2:] for row in rows} == {
        USDC: ["0.001500", "USDC", "1500"],
        EURC: ["—", str(2**100)],
    }
    eurc = next(row for row in bigger.output.splitlines() if EURC in row)
    assert eurc.split()[2:] == ["1,267,650,600,228,229,401,496,703.205376", "USDC", str(2**100)]


async def test_the_default_tenant_is_named_default_in_json_answers(sqlite_url: str) -> None:
    engine = create_engine(sqlite_url)
    try:
        await Ledger(engine, RecordingSink()).book_settlement(booking(amount=3, tenant=""))
    finally:
        await engine.dispose()

    balance = await _invoke(sqlite_url, "balance", "--format", "json")
    statement = await _invoke(sqlite_url, "statement", "--format", "json")

    assert balance.exit_code == 0 and statement.exit_code == 0, balance.output + statement.output
    assert [json.loads(answer.output)["tenant"] for answer in (balance, statement)] == ["default", "default"]


async def test_statement_csv_is_the_ledgers_statement(sqlite_url: str, ledger: Ledger) -> None:
    result = await _invoke(sqlite_url, "statement", "--tenant", "acme", "--since", "2026-01-01T00:00:00Z")

    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == statement_csv(await ledger.statement("acme")).encode()
    assert [row["amount"] for row in csv.DictReader(io.StringIO(result.output))] == ["1500", str(2**100)]


async def test_statement_json_and_bad_times(sqlite_url: str, ledger: Ledger) -> None:
    as_json = await _invoke(sqlite_url, "statement", "--tenant", "globex", "--format", "json")
    naive = await _invoke(sqlite_url, "statement", "--tenant", "acme", "--since", "2026-01-01T00:00:00")

    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.output)
    assert document["tenant"] == "globex" and [line["amount"] for line in document["lines"]] == ["7"]
    assert naive.exit_code == 2 and "has no time zone" in naive.output


async def test_check_reports_healthy_books(sqlite_url: str, ledger: Ledger) -> None:
    result = await _invoke(sqlite_url, "check")

    assert result.exit_code == 0, result.output
    assert result.output == "ledger invariants hold\n"
