"""`shapes.shape` keeps what the specification fixes and hides only what differs between runs.

The live tests compare shapes, so a normaliser that hid too much would let any message pass; each case
below changes one thing an example fixes and must change the shape.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from a2a_x402.extension import EXTENSION_URI

from .shapes import shape
from .support import JSON, example


def _status_message(document: JSON) -> JSON:
    message: JSON = document["result"]["task"]["status"]["message"]
    return message


def _extension(document: JSON) -> JSON:
    value: JSON = _status_message(document)["metadata"][EXTENSION_URI]
    return value


def _receipt(document: JSON) -> JSON:
    receipt: JSON = _extension(document)["receipts"][0]
    return receipt


def _same_run_values(document: JSON) -> None:
    """Change only what the specification calls illustrative: ids, hashes, addresses, times, text."""
    task = document["result"]["task"]
    task["id"] = task["contextId"] = "another-id"
    message = _status_message(document)
    message["messageId"] = "another-message"
    message["parts"][0]["text"] = "Some other words."
    task["status"]["timestamp"] = "2027-01-01T00:00:00Z"
    receipt = _receipt(document)
    receipt["transaction"] = "0x" + "ab" * 32
    receipt["payer"] = "0x" + "cd" * 20
    receipt["extensions"]["settlement"]["blockNumber"] = 7


def test_run_dependent_values_do_not_change_the_shape() -> None:
    document = example("payment-completed.response.json")
    changed = copy.deepcopy(document)
    _same_run_values(changed)
    assert changed != document
    assert shape(changed) == shape(document)


def _set(path: Callable[[JSON], JSON], name: str, value: Any) -> Callable[[JSON], None]:
    def change(document: JSON) -> None:
        path(document)[name] = value

    return change


def _drop(path: Callable[[JSON], JSON], name: str) -> Callable[[JSON], None]:
    def change(document: JSON) -> None:
        del path(document)[name]

    return change


def _add_receipt(document: JSON) -> None:
    receipts = _extension(document)["receipts"]
    receipts.insert(0, {**receipts[0], "success": False, "errorReason": "insufficient_funds"})


@pytest.mark.parametrize(
    "change",
    [
        _set(lambda d: d["result"]["task"]["status"], "state", "TASK_STATE_WORKING"),
        _set(_extension, "status", "payment-verified"),
        _set(_extension, "error", "SETTLEMENT_FAILED"),
        _drop(_status_message, "extensions"),
        _set(_receipt, "success", False),
        _set(_receipt, "amount", "250001"),
        _set(_receipt, "network", "eip155:8453"),
        _drop(_receipt, "payer"),
        _set(lambda d: _receipt(d)["extensions"]["settlement"], "confirmations", 2),
        _drop(_receipt, "extensions"),
        _add_receipt,
        _drop(lambda d: d["result"]["task"], "artifacts"),
        _set(lambda d: d["result"]["task"]["artifacts"][0]["parts"][0]["data"], "words", 8),
        _set(lambda d: d["result"], "message", {}),
    ],
    ids=[
        "task-state",
        "extension-status",
        "extra-member",
        "message-extensions",
        "receipt-success",
        "receipt-amount",
        "receipt-network",
        "receipt-payer-missing",
        "confirmation-depth",
        "receipt-extensions-missing",
        "receipt-count",
        "artifacts-missing",
        "artifact-content",
        "result-member",
    ],
)
def test_what_the_specification_fixes_changes_the_shape(change: Callable[[JSON], None]) -> None:
    document = example("payment-completed.response.json")
    changed = copy.deepcopy(document)
    change(changed)
    assert shape(changed) != shape(document)


def test_an_error_code_changes_the_shape() -> None:
    document = example("payment-mismatch.error.json")
    changed = copy.deepcopy(document)
    changed["error"]["code"] = -32004
    assert shape(changed) != shape(document)
    changed = copy.deepcopy(document)
    changed["error"]["message"] = "other words for people"
    assert shape(changed) == shape(document)


def test_history_is_dropped_everywhere() -> None:
    document = example("payment-completed.response.json")
    changed = copy.deepcopy(document)
    changed["result"]["task"]["history"] = [_status_message(document)]
    assert shape(changed) == shape(document)
