"""Statements: the lines the ledger reports, and their exact CSV and JSON renderings."""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import json
from datetime import UTC, datetime, timedelta

from a2a_x402.merchant.ledger import (
    STATEMENT_COLUMNS,
    Ap2References,
    Balance,
    EntryKind,
    EntryStatus,
    Ledger,
    StatementLine,
    balances_json,
    statement_csv,
    statement_json,
)

from .bookings import EURC, NETWORK, PAY_TO, PAYER, USDC, booking

BOOKED = datetime(2026, 11, 30, 12, 0, 1, 250000, tzinfo=UTC)
TX = "0x" + "cd" * 32
# A payment made with AP2 mandates: one of its references starts like a formula, and is guarded as one.
AP2 = Ap2References(checkout_hash="C" * 43, payment_ref="-" + "P" * 42, open_mandate="O" * 43)

CREDIT = StatementLine(
    sequence=7,
    entry_id="je_019a00000000aaaaaaaaaaaaaaaa",
    kind=EntryKind.SETTLEMENT,
    status=EntryStatus.REVERSED,
    booked_at=BOOKED,
    effective_at=datetime(2026, 11, 30, 12, tzinfo=UTC),
    task_id='=HYPERLINK("http://evil")',
    context_id='ctx, "quoted"',
    payer=PAYER,
    pay_to=PAY_TO,
    network=NETWORK,
    asset=USDC,
    direction="credit",
    amount=2**200,
    balance_after=2**200 + 5,
    tx_hash=TX,
    block_number=1234,
    reverses_entry_id=None,
)
DEBIT = StatementLine(
    **{
        **{name: getattr(CREDIT, name) for name in CREDIT.__slots__},
        "sequence": 8,
        "entry_id": "je_019a00000001bbbbbbbbbbbbbbbb",
        "kind": EntryKind.REVERSAL,
        "booked_at": BOOKED + timedelta(minutes=1),
        "task_id": "task-1",
        "context_id": "ctx-1",
        "direction": "debit",
        "balance_after": 5,
        "reverses_entry_id": "je_019a00000000aaaaaaaaaaaaaaaa",
        "ap2": AP2,
    }
)


def test_csv_is_exact() -> None:
    header = ",".join(STATEMENT_COLUMNS)
    amount = str(2**200)
    expected = (
        f"{header}\r\n"
        f"7,je_019a00000000aaaaaaaaaaaaaaaa,settlement,reversed,2026-11-30T12:00:01.250000Z,"
        f'2026-11-30T12:00:00.000000Z,"\'=HYPERLINK(""http://evil"")","ctx, ""quoted""",{PAYER},{PAY_TO},'
        f"{NETWORK},{USDC},credit,{amount},{2**200 + 5},{TX},1234,,,,\r\n"
        f"8,je_019a00000001bbbbbbbbbbbbbbbb,reversal,reversed,2026-11-30T12:01:01.250000Z,"
        f"2026-11-30T12:00:00.000000Z,task-1,ctx-1,{PAYER},{PAY_TO},{NETWORK},{USDC},debit,{amount},5,{TX},1234,"
        f"je_019a00000000aaaaaaaaaaaaaaaa,{'C' * 43},'-{'P' * 42},{'O' * 43}\r\n"
    )

    assert statement_csv([CREDIT, DEBIT]) == expected
    assert statement_csv([]) == f"{header}\r\n"


def _csv_row(line: StatementLine) -> dict[str, str]:
    [row] = list(csv.DictReader(io.StringIO(statement_csv([line]))))
    return row


def test_csv_guards_every_formula_start_per_owasp_also_after_blanks_and_separators() -> None:
    # Issue 25's cases first, then every start OWASP names, full-width and small forms included.
    formulas = [" =1+1", ";=1+1", "\uff1d1+1", "|calc", "=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1", "\r=1"]
    formulas += [
        "\n=1",
        "%0A",
        "\uff0b1",
        "\uff0d1",
        "\uff20SUM(A1)",
        "\uff5ccalc",
        "\u3000=1",
        " ;, =1",
        ",=1",
    ]
    harmless = ["task-1", "ctx 1 = 2", "a=b", "", " task", "0x12", "1+1"]
    for text in formulas + harmless:
        row = _csv_row(dataclasses.replace(CREDIT, task_id=text, context_id=text))
        expected = "'" + text if text in formulas else text
        assert (row["task_id"], row["context_id"]) == (expected, expected), repr(text)


def test_csv_writes_our_own_integers_as_numbers_a_negative_amount_too() -> None:
    row = _csv_row(dataclasses.replace(CREDIT, amount=-5, balance_after=-(2**70)))

    assert (row["amount"], row["balance_after"], row["sequence"]) == ("-5", str(-(2**70)), "7")


def test_json_is_exact() -> None:
    rendered = statement_json("acme", [DEBIT], since=BOOKED, until=None)

    assert rendered == (
        '{"tenant":"acme","since":"2026-11-30T12:00:01.250000Z","until":null,"lines":[{"sequence":8,'
        '"entryId":"je_019a00000001bbbbbbbbbbbbbbbb","kind":"reversal","status":"reversed",'
        '"bookedAt":"2026-11-30T12:01:01.250000Z","effectiveAt":"2026-11-30T12:00:00.000000Z","taskId":"task-1",'
        f'"contextId":"ctx-1","payer":"{PAYER}","payTo":"{PAY_TO}","network":"{NETWORK}","asset":"{USDC}",'
        f'"direction":"debit","amount":"{2**200}","balanceAfter":"5","txHash":"{TX}","blockNumber":1234,'
        '"reversesEntryId":"je_019a00000000aaaaaaaaaaaaaaaa",'
        f'"ap2CheckoutHash":"{"C" * 43}","ap2PaymentRef":"-{"P" * 42}","ap2OpenMandate":"{"O" * 43}"}}]}}'
    )
    without = statement_json("acme", [CREDIT])
    assert '"ap2CheckoutHash":null,"ap2PaymentRef":null,"ap2OpenMandate":null}' in without


def test_balances_json_is_exact() -> None:
    balance = Balance(
        tenant="acme",
        network=NETWORK,
        asset=USDC,
        account_id="acct_1",
        balance=2**70,
        credits=2**70 + 1,
        debits=1,
    )

    assert balances_json("acme", [balance]) == (
        f'{{"tenant":"acme","balances":[{{"network":"{NETWORK}","asset":"{USDC}","accountId":"acct_1",'
        f'"balance":"{2**70}","credits":"{2**70 + 1}","debits":"1"}}]}}'
    )


async def test_statement_lists_revenue_movements_in_order_with_running_balance(ledger: Ledger) -> None:
    first = await ledger.book_settlement(booking(amount=300, task_id="t-1"))
    second = await ledger.book_settlement(booking(amount=200, task_id="t-2"))
    await ledger.book_settlement(booking(amount=50, asset=EURC))
    await ledger.book_settlement(booking(amount=999, tenant="globex"))
    await ledger.mark_final(first.id, confirmations=2)
    reversal = await ledger.reverse_settlement(second.id)

    lines = await ledger.statement("acme")

    assert [(line.entry_id, line.direction, line.amount, line.status) for line in lines] == [
        (first.id, "credit", 300, EntryStatus.FINALIZED),
        (second.id, "credit", 200, EntryStatus.REVERSED),
        (lines[2].entry_id, "credit", 50, EntryStatus.SETTLED),
        (reversal.id, "debit", 200, EntryStatus.REVERSED),
    ]
    assert [line.balance_after for line in lines] == [300, 500, 50, 300]  # running balance per asset
    assert [line.sequence for line in lines] == sorted(line.sequence for line in lines)
    assert lines[3].reverses_entry_id == second.id and lines[3].task_id == "t-2"
    rows = list(csv.DictReader(io.StringIO(statement_csv(lines))))
    assert [row["amount"] for row in rows] == ["300", "200", "50", "200"]
    document = json.loads(statement_json("acme", lines))
    assert [line["entryId"] for line in document["lines"]] == [line.entry_id for line in lines]


async def test_statement_window_is_half_open_on_booking_time(ledger: Ledger) -> None:
    first = await ledger.book_settlement(booking(amount=1))
    await asyncio.sleep(0.01)
    second = await ledger.book_settlement(booking(amount=2))

    assert [line.entry_id for line in await ledger.statement("acme", since=second.booked_at)] == [second.id]
    assert [line.entry_id for line in await ledger.statement("acme", until=second.booked_at)] == [first.id]
    window = await ledger.statement(
        "acme", since=first.booked_at, until=second.booked_at + timedelta(microseconds=1)
    )
    assert [line.entry_id for line in window] == [first.id, second.id]
    assert await ledger.statement("globex") == []
