"""`spec._tables`: the generated tables render every row of the wire contract's tables."""

from __future__ import annotations

import pytest

from a2a_x402.conformance import CHECKS, CheckSpec, Level, Scope
from a2a_x402.extension import (
    LITERAL_MAPPINGS,
    REASON_ERROR_CODES,
    SETTLEMENT_PENDING_REASON,
    LiteralCategory,
    LiteralMapping,
    PaymentErrorCode,
)
from spec import (
    CATEGORY_TITLES,
    render_check_table,
    render_migration_table,
    render_reason_table,
    section_anchors,
)
from spec.build import SPEC_PATH


def test_every_category_has_a_title() -> None:
    assert set(CATEGORY_TITLES) == set(LiteralCategory)


def test_migration_table_has_one_row_per_mapping_in_order() -> None:
    lines = render_migration_table(LITERAL_MAPPINGS).splitlines()
    rows = lines[2:]
    assert len(rows) == len(LITERAL_MAPPINGS)
    for row, mapping in zip(rows, LITERAL_MAPPINGS, strict=True):
        for literal in (mapping.v02, mapping.v03):
            if literal is not None and not literal.startswith("("):
                assert f"`{literal.replace('|', chr(92) + '|')}`" in row


def test_migration_table_titles_each_category_once() -> None:
    table = render_migration_table(LITERAL_MAPPINGS)
    for category in {row.category for row in LITERAL_MAPPINGS}:
        assert table.count(f"**{CATEGORY_TITLES[category]}**") == 1


def test_migration_table_cells() -> None:
    rows = (
        LiteralMapping(LiteralCategory.HEADER, "a|b", None, "x|y"),
        LiteralMapping(LiteralCategory.HEADER, None, "(closes the stream)"),
    )
    lines = render_migration_table(rows).splitlines()
    assert lines[2] == "| **HTTP headers** | `a\\|b` | — | x\\|y |"
    assert lines[3] == "|  | — | *closes the stream* |  |"


def test_reason_table_maps_every_reason_and_says_what_is_left() -> None:
    table = render_reason_table(REASON_ERROR_CODES)
    for reason, code in REASON_ERROR_CODES.items():
        assert f"| `{reason}` | `{code.value}` |" in table
    assert f"| any other reason, or none | `{PaymentErrorCode.SETTLEMENT_FAILED.value}` |" in table
    assert f"`{SETTLEMENT_PENDING_REASON}`" in table
    assert len(table.splitlines()) == 2 + len(REASON_ERROR_CODES) + 2


def test_check_table_has_one_row_per_check_in_order_with_its_section_linked() -> None:
    anchors = section_anchors(SPEC_PATH.read_text(encoding="utf-8"))
    rows = render_check_table(CHECKS, anchors).splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{check.id}`" for check in CHECKS]
    assert rows[0].endswith(f"| [3](#{anchors['3']}) | {CHECKS[0].title} |")


def test_check_table_refuses_a_section_the_specification_lacks() -> None:
    check = CheckSpec("card.x", Level.MUST, Scope.CARD, "99.9", "No such section.")
    with pytest.raises(ValueError, match="99.9"):
        render_check_table([check], {"3": "3-declaration-in-the-agent-card"})
