"""A payment made with AP2 mandates is booked with their references (§20), and every fact about it says them:
the entry and its reversal, the statement, and the settlement webhooks' `ap2` member. A payment made
without mandates has none, and its webhooks no `ap2` member at all. (SQLite and PostgreSQL.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import jsonschema_rs
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from a2a_x402.merchant.ledger import (
    Ap2References,
    InvalidBookingError,
    Ledger,
    LedgerEntry,
    SettlementBooked,
    SettlementFinalized,
    SettlementReversed,
)
from a2a_x402.merchant.webhooks._events import fact_event, serialize_event

from .bookings import RecordingSink, booking

AP2 = Ap2References(checkout_hash="c" * 43, payment_ref="p-" + "P" * 41, open_mandate="o_" + "O" * 41)
SCHEMAS = Path(__file__).resolve().parents[3] / "a2a_x402" / "merchant" / "webhooks" / "schemas"
NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)


def _body(fact: SettlementBooked | SettlementFinalized | SettlementReversed) -> dict[str, object]:
    """The webhook body announcing `fact`, validated against its committed JSON Schema."""
    event_type, data = fact_event(fact)
    body = serialize_event(event_type, event_id="evt_" + "0" * 28, timestamp=NOW, sequence=1, data=data)
    schema = json.loads((SCHEMAS / f"{event_type.value}.json").read_text())
    jsonschema_rs.validator_for(schema, validate_formats=True).validate(json.loads(body))
    parsed: dict[str, object] = json.loads(body)["data"]
    return parsed


async def test_an_entry_made_with_mandates_carries_their_references_everywhere(
    ledger: Ledger, sink: RecordingSink
) -> None:
    entry = await ledger.book_settlement(booking(ap2=AP2))
    final = await ledger.mark_final(entry.id, confirmations=3)
    reversal = await ledger.reverse_settlement(entry.id, reason="reorg")
    stored = await ledger.get_entry(entry.id)
    [line, undone] = await ledger.statement("acme")

    assert entry.ap2 == stored.ap2 == AP2
    assert (stored.ap2_checkout_hash, stored.ap2_payment_ref, stored.ap2_open_mandate) == (
        AP2.checkout_hash,
        AP2.payment_ref,
        AP2.open_mandate,
    )
    assert reversal.ap2 == AP2 and final.entry_id == entry.id
    assert line.ap2 == undone.ap2 == AP2
    wire = {"checkoutHash": AP2.checkout_hash, "paymentRef": AP2.payment_ref, "openMandate": AP2.open_mandate}
    assert [_body(fact)["ap2"] for fact in sink.facts] == [wire, wire, wire]


async def test_an_entry_made_without_mandates_has_none_and_its_webhooks_no_ap2_member(
    ledger: Ledger, sink: RecordingSink
) -> None:
    entry = await ledger.book_settlement(booking())
    await ledger.mark_final(entry.id, confirmations=3)
    await ledger.reverse_settlement(entry.id, reason="reorg")

    assert entry.ap2 is None and (await ledger.get_entry(entry.id)).ap2 is None
    assert all(line.ap2 is None for line in await ledger.statement("acme"))
    assert all("ap2" not in _body(fact) for fact in sink.facts)


async def test_the_lookup_runs_in_the_booking_and_its_failure_books_nothing(ledger: Ledger) -> None:
    seen: list[bool] = []

    async def lookup(connection: AsyncConnection) -> Ap2References:
        seen.append(connection.in_transaction())
        return AP2

    async def broken(connection: AsyncConnection) -> Ap2References:
        raise RuntimeError("the usage record cannot be read")

    entry = await ledger.book_settlement(booking(), ap2_of=lookup)
    given = await ledger.book_settlement(booking(ap2=AP2, task_id="task-2"), ap2_of=broken)
    with pytest.raises(RuntimeError):
        await ledger.book_settlement(booking(task_id="task-3"), ap2_of=broken)

    assert seen == [True] and entry.ap2 == given.ap2 == AP2
    assert [record.entry.task_id for record in await ledger.settlements("acme")] == ["task-2", "task-1"]


@pytest.mark.parametrize(
    "changes",
    [
        {"checkout_hash": "c" * 42},
        {"payment_ref": "p" * 44},
        {"open_mandate": "o" * 42 + "="},
        {"checkout_hash": "c" * 42 + "+"},
        {"payment_ref": 7},
    ],
)
def test_a_reference_that_is_no_sha256_is_refused(changes: dict[str, object]) -> None:
    values: dict[str, object] = {
        "checkout_hash": AP2.checkout_hash,
        "payment_ref": AP2.payment_ref,
        "open_mandate": AP2.open_mandate,
        **changes,
    }
    with pytest.raises(InvalidBookingError, match=r"^ap2\.\w+: must be 43 base64url characters"):
        Ap2References(**values)  # type: ignore[arg-type]
    with pytest.raises(InvalidBookingError, match="ap2: must be Ap2References"):
        booking(ap2={"checkout_hash": AP2.checkout_hash})


async def test_the_columns_hold_what_was_booked(ledger: Ledger) -> None:
    entry = await ledger.book_settlement(booking(ap2=AP2))
    table = LedgerEntry.__table__
    async with ledger._engine.connect() as connection:  # noqa: SLF001 - the stored row itself
        row = (await connection.execute(sa.select(table).where(table.c.id == entry.id))).one()
    assert (row.ap2_checkout_hash, row.ap2_payment_ref, row.ap2_open_mandate) == (
        AP2.checkout_hash,
        AP2.payment_ref,
        AP2.open_mandate,
    )
