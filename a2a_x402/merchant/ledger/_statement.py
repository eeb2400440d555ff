"""Rendering statements and balances as CSV and JSON: amounts as decimal strings, times in UTC.

Both renderings are deterministic (fixed column and key order, fixed time format), so the same lines
always give the same bytes.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ._records import Balance, StatementLine

__all__ = [
    "STATEMENT_COLUMNS",
    "balances_json",
    "format_time",
    "spreadsheet_safe",
    "statement_csv",
    "statement_json",
]

STATEMENT_COLUMNS = (
    "sequence",
    "entry_id",
    "kind",
    "status",
    "booked_at",
    "effective_at",
    "task_id",
    "context_id",
    "payer",
    "pay_to",
    "network",
    "asset",
    "direction",
    "amount",
    "balance_after",
    "tx_hash",
    "block_number",
    "reverses_entry_id",
    "ap2_checkout_hash",
    "ap2_payment_ref",
    "ap2_open_mandate",
)
"""The CSV header, in column order. The `ap2_` columns name the AP2 mandates of a payment made with them
(§20), and are empty (null in JSON) for any other."""

# A spreadsheet runs a cell starting with one of these as a formula (OWASP, "CSV Injection"), also after
# leading blanks or separators it drops, and in their full-width and small forms, which some read alike.
_FORMULA_STARTS = frozenset("=+-@\t\r\n|%\uff1d\uff0b\uff0d\uff20\uff5c\uff05\ufe66\ufe62\ufe63\ufe6b")
_SKIPPED = ";,\uff1b\uff0c"  # separators (and their full-width forms) a spreadsheet may drop
_AP2_COLUMNS = ("ap2_checkout_hash", "ap2_payment_ref", "ap2_open_mandate")
_OUR_NUMBERS = frozenset({"sequence", "amount", "balance_after", "block_number"})


def _guard(text: str) -> str:
    """`text` with a leading `'` if a spreadsheet could take it for a formula, else unchanged."""
    rest = text
    while rest and (rest[0].isspace() or rest[0] in _SKIPPED):
        rest = rest[1:]
    if text[:1] in _FORMULA_STARTS or rest[:1] in _FORMULA_STARTS:
        return "'" + text
    return text


def spreadsheet_safe(text: str) -> str:
    """`text` as a CSV cell a spreadsheet will not run: a leading `'` if it could be taken for a formula
    (the guard of the statement's CSV, for other exports of the same data)."""
    return _guard(text)


def format_time(value: datetime) -> str:
    """ISO 8601 in UTC with microseconds and a `Z` suffix, e.g. `2026-11-30T12:00:00.000000Z`."""
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _cells(line: StatementLine) -> dict[str, str]:
    return {
        "sequence": str(line.sequence),
        "entry_id": line.entry_id,
        "kind": line.kind.value,
        "status": line.status.value,
        "booked_at": format_time(line.booked_at),
        "effective_at": format_time(line.effective_at),
        "task_id": line.task_id,
        "context_id": line.context_id,
        "payer": line.payer,
        "pay_to": line.pay_to,
        "network": line.network,
        "asset": line.asset,
        "direction": line.direction,
        "amount": str(line.amount),
        "balance_after": str(line.balance_after),
        "tx_hash": line.tx_hash,
        "block_number": str(line.block_number),
        "reverses_entry_id": line.reverses_entry_id or "",
        "ap2_checkout_hash": "" if line.ap2 is None else line.ap2.checkout_hash,
        "ap2_payment_ref": "" if line.ap2 is None else line.ap2.payment_ref,
        "ap2_open_mandate": "" if line.ap2 is None else line.ap2.open_mandate,
    }


def statement_csv(lines: Sequence[StatementLine]) -> str:
    """The statement as RFC 4180 CSV (CRLF line ends) with a `STATEMENT_COLUMNS` header."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(STATEMENT_COLUMNS)
    for line in lines:
        cells = _cells(line)
        writer.writerow(
            cells[column] if column in _OUR_NUMBERS else _guard(cells[column]) for column in STATEMENT_COLUMNS
        )
    return buffer.getvalue()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def statement_json(
    tenant: str,
    lines: Sequence[StatementLine],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
) -> str:
    """The statement as compact JSON: `{"tenant", "since", "until", "lines": [...]}`.

    Line keys are the CSV columns in camelCase; integers that are money (`amount`, `balanceAfter`) are
    decimal strings, `sequence` and `blockNumber` are numbers, a missing `reversesEntryId` is null, and so
    are the `ap2…` references of a payment made without AP2 mandates.
    """
    rendered: list[dict[str, Any]] = []
    for line in lines:
        cells: dict[str, Any] = _cells(line)
        cells["sequence"] = line.sequence
        cells["block_number"] = line.block_number
        cells["reverses_entry_id"] = line.reverses_entry_id
        for name in _AP2_COLUMNS:
            cells[name] = cells[name] or None
        rendered.append({_camel(column): cells[column] for column in STATEMENT_COLUMNS})
    document = {
        "tenant": tenant,
        "since": None if since is None else format_time(since),
        "until": None if until is None else format_time(until),
        "lines": rendered,
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def balances_json(tenant: str, balances: Sequence[Balance]) -> str:
    """The tenant's balances as compact JSON: `{"tenant", "balances": [{network, asset, accountId, balance,
    credits, debits}]}` with amounts as decimal strings."""
    document = {
        "tenant": tenant,
        "balances": [
            {
                "network": balance.network,
                "asset": balance.asset,
                "accountId": balance.account_id,
                "balance": str(balance.balance),
                "credits": str(balance.credits),
                "debits": str(balance.debits),
            }
            for balance in balances
        ],
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)
