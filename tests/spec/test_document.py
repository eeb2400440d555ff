"""The specification's prose agrees with the code: its tables of statuses, codes, errors and versions,
its literals, and its links."""

from __future__ import annotations

import re

import pytest
from a2a.types import Role, TaskState
from a2a.utils import errors as a2a_errors

from a2a_x402.extension import (
    EXTENSION_URI,
    EXTENSION_URI_V01,
    EXTENSION_URI_V02,
    RETRYABLE_ERROR_CODES,
    PaymentErrorCode,
    PaymentStatus,
    negotiate_dialect,
)
from spec.build import SPEC_DIR

from .support import spec_text

_URIS = {"v0.3": EXTENSION_URI, "v0.2": EXTENSION_URI_V02, "v0.1": EXTENSION_URI_V01}


def _section(title: str) -> str:
    """The text of the section whose heading ends with `title`, up to the next heading of any level."""
    match = re.search(rf"^#+ [\d.]* ?{re.escape(title)}\n(.*?)(?=^#)", spec_text(), re.MULTILINE | re.DOTALL)
    assert match is not None, f"no section {title!r}"
    return match.group(1)


def _rows(section: str) -> list[list[str]]:
    """The body rows of the Markdown tables in `section`, as lists of stripped cells."""
    rows = []
    for line in (line.strip() for line in section.splitlines()):
        if line.startswith("| ") and not line.startswith("| ---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows[1:] if rows else rows


def _slug(heading: str) -> str:
    # GitHub's anchors: lower case, punctuation other than "-" and "_" removed, spaces to hyphens.
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_uris_are_the_wire_contract_s() -> None:
    text = spec_text()
    assert f"| Extension URI | `{EXTENSION_URI}` |" in text
    assert f"```text\n{EXTENSION_URI}\n```" in _section("Extension identity and versions")
    for uri in re.findall(r"https://github\.com/google[-\w]*/a2a-x402/[^\s`)\"]*", text):
        assert uri.rstrip("/") in _URIS.values() or uri.startswith(EXTENSION_URI + "/schema/"), uri


def test_status_table_lists_every_status_with_its_sender() -> None:
    rows = _rows(_section("Members"))
    assert [row[0] for row in rows] == [f"`{status.value}`" for status in PaymentStatus]
    client = {row[0].strip("`") for row in rows if row[1].startswith("client")}
    assert client == {PaymentStatus.PAYMENT_SUBMITTED.value, PaymentStatus.PAYMENT_REJECTED.value}


def test_error_code_table_lists_every_code_and_which_are_retryable() -> None:
    rows = _rows(_section("Payment error codes"))
    assert [row[0] for row in rows] == [f"`{code.value}`" for code in PaymentErrorCode]
    retryable = {PaymentErrorCode(row[0].strip("`")) for row in rows if row[1] == "yes"}
    assert retryable == RETRYABLE_ERROR_CODES
    assert all(row[1] in ("yes", "no") for row in rows)


def test_a2a_error_table_matches_the_sdk_mapping() -> None:
    rows = _rows(_section("A2A errors used by the extension"))
    assert rows
    for _, name, rpc_code, http in rows:
        error = getattr(a2a_errors, name.strip("`"))
        assert int(rpc_code.strip("`")) == a2a_errors.JSON_RPC_ERROR_CODE_MAP[error]
        assert int(http) == a2a_errors.A2A_ERROR_MAPPING[error].http_code


def test_coexistence_table_is_what_negotiation_does() -> None:
    rows = _rows(_section("Coexistence with v0.2"))
    assert len(rows) == 5
    for version_cell, uri_cell, result in rows:
        version = "1.0" if version_cell.startswith("`1.0`") else "0.3"
        requested = [uri for label, uri in _URIS.items() if label in uri_cell]
        expected = None if result == "none" else result.split(" ")[0]
        dialect = negotiate_dialect(requested, version)
        assert (dialect.value if dialect is not None else None) == expected, (version_cell, uri_cell)
        if version == "0.3":
            assert negotiate_dialect(requested, None) == dialect, "an absent A2A-Version means 0.3"


@pytest.mark.parametrize(
    ("pattern", "known"),
    [
        (r"`(payment-[a-z-]+)`", {status.value for status in PaymentStatus}),
        (r"\b(TASK_STATE_[A-Z_]+)\b", set(TaskState.keys())),
        (r"\b(ROLE_[A-Z]+)\b", set(Role.keys())),
    ],
    ids=["statuses", "task-states", "roles"],
)
def test_every_literal_is_a_real_one(pattern: str, known: set[str]) -> None:
    used = set(re.findall(pattern, spec_text()))
    assert used and used <= known


def test_internal_links_resolve() -> None:
    text = spec_text()
    anchors = {_slug(heading) for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links and links <= anchors, sorted(links - anchors)


def test_relative_links_resolve() -> None:
    targets = set(re.findall(r"\]\(((?:schema|examples)/[^)]*)\)", spec_text()))
    assert targets
    for target in targets:
        assert (SPEC_DIR / target).exists(), target
