"""The kit's reading of a metered completion's `usage` against §6.4: every rule is one problem, in words."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_x402.conformance._metered import _usage_problem

MAXIMUM = 500_000
GOOD: dict[str, Any] = {
    "maximum": "500000",
    "settled": "10900",
    "items": [
        {"name": "characters", "quantity": "36", "unitPrice": "25", "amount": "900"},
        {"name": "sentences", "quantity": "2", "unitPrice": "5000", "amount": "10000"},
    ],
}
RECEIPT = {"success": True, "transaction": "0x" + "ab" * 32, "amount": "10900"}


def _item(**changes: str) -> dict[str, Any]:
    return {**GOOD, "items": [{**GOOD["items"][0], **changes}, GOOD["items"][1]]}


def test_the_spec_s_example_is_consistent() -> None:
    assert _usage_problem(GOOD, RECEIPT, MAXIMUM) == ""


def test_usage_over_the_maximum_settles_the_maximum() -> None:
    usage = {
        **GOOD,
        "settled": "500000",
        "items": [{"name": "t", "quantity": "30000", "unitPrice": "25", "amount": "750000"}],
    }
    assert _usage_problem(usage, {**RECEIPT, "amount": "500000"}, MAXIMUM) == ""


@pytest.mark.parametrize(
    ("usage", "receipt", "words"),
    [
        ({**GOOD, "total": "1"}, RECEIPT, "members §6.4 does not name"),
        (_item(amount="901"), RECEIPT, "not quantity × unitPrice = 900"),
        (_item(quantity="036"), RECEIPT, "not a decimal string"),
        (_item(quantity=36), RECEIPT, "not a decimal string"),  # type: ignore[arg-type]
        (_item(name=""), RECEIPT, "1 to 128 characters"),
        ({**GOOD, "settled": "10000"}, RECEIPT, "not min(sum of the items' amounts 10900"),
        ({**GOOD, "maximum": "600000"}, RECEIPT, "not the offered maximum 500000"),
        (GOOD, {**RECEIPT, "amount": "500000"}, "the successful receipt's amount is '500000'"),
        (GOOD, {**RECEIPT, "amount": None}, "the successful receipt's amount is None"),
        ({**GOOD, "items": "many"}, RECEIPT, "not a list"),
    ],
    ids=[
        "member",
        "arithmetic",
        "leading-zero",
        "json-number",
        "name",
        "settled",
        "maximum",
        "receipt",
        "no-receipt-amount",
        "items",
    ],
)
def test_each_broken_rule_is_named(usage: Any, receipt: Any, words: str) -> None:
    assert words in _usage_problem(usage, receipt, MAXIMUM)
