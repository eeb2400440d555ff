"""The usage meter a metered skill's work reports on: strict reports, the cap, the record's wire form."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext

from a2a_x402.extension import PaymentUsage, UsageItem
from a2a_x402.merchant import UsageError, UsageMeter, usage_meter
from a2a_x402.merchant.payments._usage import USAGE_METER_KEY, metering, usage_from_json


def context() -> RequestContext:
    return RequestContext(call_context=ServerCallContext())


def test_a_metered_turn_records_items_and_caps_what_is_settled() -> None:
    turn = context()
    with metering(turn, maximum=100_000) as meter:
        usage_meter(turn).add("tokens", quantity=1000, unit_price=25)
        usage_meter(turn).add("tokens", quantity=234, unit_price=25)  # the same item adds up
        usage_meter(turn).add("tokens", quantity=10, unit_price=30)  # another price, another item
        usage_meter(turn).add("calls", quantity=0, unit_price=10**6)
        assert usage_meter(turn) is meter and meter.metered

    record = meter.record()
    assert record.items == (
        UsageItem("tokens", 1234, 25, 30850),
        UsageItem("tokens", 10, 30, 300),
        UsageItem("calls", 0, 10**6, 0),
    )
    assert (record.maximum, record.settled) == (100_000, 31150)
    assert record.to_wire() == {
        "maximum": "100000",
        "settled": "31150",
        "items": [
            {"name": "tokens", "quantity": "1234", "unitPrice": "25", "amount": "30850"},
            {"name": "tokens", "quantity": "10", "unitPrice": "30", "amount": "300"},
            {"name": "calls", "quantity": "0", "unitPrice": "1000000", "amount": "0"},
        ],
    }
    assert usage_from_json(record.to_wire()) == record
    assert USAGE_METER_KEY not in turn.call_context.state


def test_usage_above_the_maximum_settles_the_maximum() -> None:
    turn = context()
    with metering(turn, maximum=500) as meter:
        usage_meter(turn).add("pages", quantity=3, unit_price=400)

    assert meter.record() == PaymentUsage(500, 500, (UsageItem("pages", 3, 400, 1200),))
    assert meter.record().to_wire()["settled"] == "500"


def test_numbers_beyond_2_53_stay_exact_on_the_wire() -> None:
    turn = context()
    with metering(turn, maximum=2**255) as meter:
        usage_meter(turn).add("bytes", quantity=2**60 + 1, unit_price=3)
    wire = meter.record().to_wire()

    assert wire["items"] == [
        {"name": "bytes", "quantity": str(2**60 + 1), "unitPrice": "3", "amount": str((2**60 + 1) * 3)}
    ]
    assert wire["settled"] == str((2**60 + 1) * 3)
    assert usage_from_json(wire) == meter.record()


def test_outside_a_metered_turn_reports_are_checked_and_dropped() -> None:
    turn = context()
    meter = usage_meter(turn)
    meter.add("tokens", quantity=5, unit_price=1)

    assert not meter.metered
    assert meter.record() == PaymentUsage(0, 0, ())
    with pytest.raises(UsageError, match="must not be negative"):
        meter.add("tokens", quantity=-1, unit_price=1)


@pytest.mark.parametrize(
    ("name", "quantity", "unit_price", "refusal"),
    [
        ("tokens", -1, 25, "usage quantity must not be negative, got -1"),
        ("tokens", 1.5, 25, "usage quantity must be a whole number (an int), got float 1.5"),
        ("tokens", True, 25, "usage quantity must be a whole number (an int), got bool True"),
        ("tokens", "12", 25, "usage quantity must be a whole number (an int), got str '12'"),
        ("tokens", 2**256, 1, "usage quantity must be below 2**256, got 1.16e+77"),
        ("tokens", 1, -25, "usage unit_price must not be negative, got -25"),
        ("tokens", 1, 0.25, "usage unit_price must be a whole number (an int), got float 0.25"),
        ("tokens", 2**200, 2**60, "usage of 'tokens' costs 2**256 atomic units or more"),
        ("", 1, 1, "usage name must be 1 to 64 printable characters, got ''"),
        ("x" * 65, 1, 1, "usage name must be 1 to 64 printable characters"),
        ("to\nkens", 1, 1, "usage name must be 1 to 64 printable characters"),
        (None, 1, 1, "usage name must be 1 to 64 printable characters, got None"),
    ],
)
def test_a_bad_report_is_refused_clearly_and_records_nothing(
    name: Any, quantity: Any, unit_price: Any, refusal: str
) -> None:
    turn = context()
    with metering(turn, maximum=10**6) as meter:
        usage_meter(turn).add("tokens", quantity=2, unit_price=25)
        with pytest.raises(UsageError) as refused:
            usage_meter(turn).add(name, quantity=quantity, unit_price=unit_price)

    assert str(refused.value).startswith(refusal)
    assert "\n" not in str(refused.value)
    assert refused.value.code == "usage_invalid"
    assert meter.record().items == (UsageItem("tokens", 2, 25, 50),)


def test_the_items_of_one_turn_are_bounded() -> None:
    turn = context()
    with metering(turn, maximum=10**6) as meter:
        for price in range(32):
            usage_meter(turn).add("tokens", quantity=1, unit_price=price)
        usage_meter(turn).add("tokens", quantity=1, unit_price=0)  # an existing item still adds up
        with pytest.raises(UsageError, match="at most 32 distinct usage items"):
            usage_meter(turn).add("tokens", quantity=1, unit_price=32)

    assert len(meter.record().items) == 32


def test_a_report_after_the_turn_is_refused() -> None:
    turn = context()
    with metering(turn, maximum=10**6) as meter:
        pass

    with pytest.raises(UsageError, match="the paid turn is over"):
        meter.add("tokens", quantity=1, unit_price=1)
    assert isinstance(usage_meter(turn), UsageMeter) and not usage_meter(turn).metered
