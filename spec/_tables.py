"""The specification's generated tables, rendered from the wire contract (``a2a_x402``).

The migration table (§16) is ``a2a_x402.LITERAL_MAPPINGS`` and the reason table (§9.2) is
``a2a_x402.REASON_ERROR_CODES``: the code the merchant runs is the only source of both, so the text a
reviewer reads cannot say something the implementation does not do. The check list (§19) is the
conformance kit's ``x402_a2a_conformance.CHECKS``, so the checks a reader sees are the checks the kit runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from a2a_x402.conformance import CheckSpec, Scope
from a2a_x402.extension import SETTLEMENT_PENDING_REASON, LiteralCategory, LiteralMapping, PaymentErrorCode

__all__ = ["CATEGORY_TITLES", "render_check_table", "render_migration_table", "render_reason_table"]

CATEGORY_TITLES: Mapping[LiteralCategory, str] = {
    LiteralCategory.EXTENSION_URI: "Extension URI",
    LiteralCategory.HEADER: "HTTP headers",
    LiteralCategory.JSONRPC_METHOD: "JSON-RPC methods",
    LiteralCategory.REQUEST_FIELD: "Request fields",
    LiteralCategory.ERROR: "Errors",
    LiteralCategory.AGENT_CARD: "Agent Card",
    LiteralCategory.TASK_STATE: "Task states",
    LiteralCategory.ROLE: "Roles",
    LiteralCategory.PART: "Parts",
    LiteralCategory.KIND: "Object discriminators",
    LiteralCategory.STREAM_EVENT: "Stream events",
    LiteralCategory.STREAM_END: "End of a stream",
    LiteralCategory.METADATA: "Extension metadata",
    LiteralCategory.X402_FIELD: "x402 fields (v1 to v2)",
    LiteralCategory.NETWORK: "Networks (x402 v1 name to CAIP-2)",
}
"""The heading each category of the migration table is shown under, in the table's order."""

_NONE = "—"


def render_migration_table(mappings: Iterable[LiteralMapping]) -> str:
    """The migration table as Markdown: one row per mapping, grouped under its category's title.

    Raises:
        ValueError: a mapping's category has no title in ``CATEGORY_TITLES``.
    """
    lines = [
        "| what | v0.2 on A2A 0.3 (x402 v1) | v0.3 on A2A 1.0 (x402 v2) | note |",
        "| --- | --- | --- | --- |",
    ]
    previous: LiteralCategory | None = None
    for row in mappings:
        if row.category not in CATEGORY_TITLES:
            raise ValueError(f"no title for literal category {row.category.value!r}")
        title = f"**{CATEGORY_TITLES[row.category]}**" if row.category is not previous else ""
        previous = row.category
        lines.append(f"| {title} | {_literal(row.v02)} | {_literal(row.v03)} | {_cell(row.note)} |")
    return "\n".join(lines) + "\n"


def render_reason_table(reasons: Mapping[str, PaymentErrorCode]) -> str:
    """The facilitator-reason table as Markdown, grouped by error code in the codes' declaration order."""
    lines = ["| x402 reason (`invalidReason` / `errorReason`) | error code |", "| --- | --- |"]
    for code in PaymentErrorCode:
        for reason, mapped in reasons.items():
            if mapped is code:
                lines.append(f"| `{reason}` | `{code.value}` |")
    lines.append(f"| any other reason, or none | `{PaymentErrorCode.SETTLEMENT_FAILED.value}` |")
    lines.append(f"| `{SETTLEMENT_PENDING_REASON}` | none: the settlement is pending, not failed |")
    return "\n".join(lines) + "\n"


_SCOPES = {Scope.CARD: "card", Scope.A2A_1_0: "A2A 1.0", Scope.A2A_0_3: "A2A 0.3 (v0.2)"}


def render_check_table(checks: Iterable[CheckSpec], anchors: Mapping[str, str]) -> str:
    """The conformance kit's checks as Markdown: id, level, where it runs, section (linked), requirement.

    ``anchors`` maps a section number to its heading's anchor (``section_anchors`` of the Markdown).

    Raises:
        ValueError: a check names a section the specification does not have.
    """
    lines = ["| check | level | runs on | § | requirement |", "| --- | --- | --- | --- | --- |"]
    for check in checks:
        if check.section not in anchors:
            raise ValueError(f"check {check.id} names section {check.section}, which the specification lacks")
        section = f"[{check.section}](#{anchors[check.section]})"
        scope, title = _SCOPES[check.scope], _cell(check.title)
        lines.append(f"| `{check.id}` | {check.level.value} | {scope} | {section} | {title} |")
    return "\n".join(lines) + "\n"


def _literal(value: str | None) -> str:
    if value is None:
        return _NONE
    if value.startswith("(") and value.endswith(")"):
        # A described behaviour, not bytes on the wire.
        return f"*{_cell(value[1:-1])}*"
    return f"`{_cell(value)}`"


def _cell(text: str) -> str:
    # A pipe ends a table cell even inside a code span.
    return text.replace("|", "\\|")
