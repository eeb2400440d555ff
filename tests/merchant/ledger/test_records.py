"""`SettlementBooking` validates and normalizes every field before anything touches the database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from a2a_x402.merchant.ledger import InvalidBookingError

from .bookings import PAYER, booking


def test_normalizes_addresses_hashes_and_time() -> None:
    tokyo = timezone(timedelta(hours=9))
    settled = booking(
        payer=PAYER.lower(),
        nonce="0x" + "AB" * 32,
        tx_hash="0x" + "CD" * 32,
        settled_at=datetime(2026, 11, 30, 21, 0, tzinfo=tokyo),
    )

    assert settled.payer == PAYER
    assert settled.nonce == "0x" + "ab" * 32 and settled.tx_hash == "0x" + "cd" * 32
    assert settled.settled_at.utcoffset() == timedelta(0) and settled.settled_at.hour == 12


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"amount": 0}, "amount"),
        ({"amount": 2**256}, "amount"),
        ({"amount": 1.0}, "amount"),
        ({"amount": True}, "amount"),
        ({"payer": "0x1234"}, "payer"),
        ({"pay_to": "0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED!"}, "pay_to"),
        ({"nonce": "0x" + "ab" * 31}, "nonce"),
        ({"nonce": "p3" + "ab" * 32}, "nonce"),
        ({"nonce": "p2" + "ab" * 33}, "nonce"),
        ({"tx_hash": "ab" * 32}, "tx_hash"),
        ({"network": "base-sepolia"}, "network"),
        ({"network": "eip155:1"}, "network"),
        ({"chain_id": 0}, "chain_id"),
        ({"block_number": -1}, "block_number"),
        ({"task_id": ""}, "task_id"),
        ({"context_id": "x" * 256}, "context_id"),
        ({"settled_at": datetime(2026, 11, 30)}, "settled_at"),  # noqa: DTZ001 - naive on purpose
        ({"maximum": 2_499_999}, "maximum"),  # a metered payment never settles more than its maximum
        ({"maximum": 2**256}, "maximum"),
        ({"maximum": 3.0e6}, "maximum"),
    ],
)
def test_refuses_malformed_fields(changes: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidBookingError, match=f"^{field}:") as raised:
        booking(**changes)
    assert raised.value.code == "invalid_booking"
    assert isinstance(raised.value, ValueError)


def test_a_permit2_nonce_key_is_booked_apart_from_an_eip3009_nonce() -> None:
    permit2 = booking(nonce="p2" + "AB" * 32)
    assert permit2.nonce == "p2" + "ab" * 32
    assert permit2.nonce != booking(nonce="0x" + "ab" * 32).nonce


def test_the_default_tenant_is_the_empty_string() -> None:
    assert booking(tenant="").tenant == ""


def test_a_metered_booking_keeps_its_maximum() -> None:
    assert booking(maximum=2_500_000).maximum == 2_500_000
    assert booking(maximum=2**256 - 1).maximum == 2**256 - 1
    assert booking().maximum is None
