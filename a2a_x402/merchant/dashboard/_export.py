"""CSV exports of what the dashboard's tables show: a page of settlements (with the AP2 references of a
payment made with mandates, empty for any other), the payers, the refused and failed payments.

RFC 4180 CSV (CRLF line ends) with a header row. Every text cell passes the statement's formula guard
(`spreadsheet_safe`, OWASP "CSV Injection": a payer-chosen skill description or an error text could start
with `=`); the numbers the dashboard itself writes (atomic amounts, counts, block numbers) are left as
they are so that a spreadsheet reads them as numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from a2a_x402.merchant.ledger import spreadsheet_safe

from ._activity import PayerView, UnpaidView
from ._views import SettlementView

__all__ = ["payers_csv", "settlements_csv", "unpaid_csv"]

_SETTLEMENT_COLUMNS = (
    "booked_at",
    "settlement_id",
    "task_id",
    "state",
    "skill",
    "description",
    "amount",
    "amount_atomic",
    "unit",
    "payer",
    "pay_to",
    "network",
    "tx_hash",
    "block_number",
    "finality",
    "ap2_checkout_hash",
    "ap2_payment_ref",
    "ap2_open_mandate",
)
_PAYER_COLUMNS = ("payer", "network", "settlements", "total", "total_atomic", "unit", "last_seen")
_UNPAID_COLUMNS = (
    "at",
    "task_id",
    "skill",
    "outcome",
    "error",
    "reason",
    "payer",
    "amount",
    "amount_atomic",
)


def _table(header: Sequence[str], rows: Iterable[Sequence[str | int]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(str(cell) if isinstance(cell, int) else spreadsheet_safe(cell) for cell in row)
    return buffer.getvalue()


def settlements_csv(rows: Sequence[SettlementView]) -> str:
    """The settlements as CSV, one line each, in the order shown."""
    return _table(
        _SETTLEMENT_COLUMNS,
        (
            (
                row.booked_at,
                row.id,
                row.task_id,
                row.state,
                row.skill,
                row.description,
                row.amount.text,
                row.amount.atomic,
                row.amount.unit,
                row.payer,
                row.pay_to,
                row.network,
                row.tx_hash,
                row.block_number,
                row.finality,
                row.ap2_checkout_hash or "",
                row.ap2_payment_ref or "",
                row.ap2_open_mandate or "",
            )
            for row in rows
        ),
    )


def payers_csv(rows: Sequence[PayerView]) -> str:
    """The payers as CSV, one line per payer and asset."""
    return _table(
        _PAYER_COLUMNS,
        (
            (
                row.payer,
                row.network,
                row.count,
                row.total.text,
                row.total.atomic,
                row.total.unit,
                row.last_seen,
            )
            for row in rows
        ),
    )


def unpaid_csv(rows: Sequence[UnpaidView]) -> str:
    """The refused and failed payments as CSV."""
    return _table(
        _UNPAID_COLUMNS,
        (
            (
                row.at,
                row.task_id,
                row.skill,
                row.state,
                row.error,
                row.reason,
                row.payer or "",
                "" if row.amount is None else f"{row.amount.text} {row.amount.unit}",
                "" if row.amount is None else row.amount.atomic,
            )
            for row in rows
        ),
    )
