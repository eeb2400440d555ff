"""The shape of an A2A JSON document: what must agree between a specification example and a live message.

Values that differ between any two runs (ids, hashes, addresses, signatures, timestamps) and free text
meant for people become placeholders; everything else (members, enum values, statuses, codes, amounts,
networks, list lengths) is kept, so two documents with equal shapes differ only where the specification
says values are illustrative. Task `history` is dropped (the examples leave it out). A receipt's
`extensions` are kept, so the examples show what the reference facilitator reports there; only the block
number in them depends on the run.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["shape"]

_ID_KEYS = frozenset({"id", "contextId", "taskId", "messageId", "artifactId", "offerId"})
_TIME_KEYS = frozenset({"timestamp", "validAfter", "validBefore"})
_RUN_NUMBER_KEYS = frozenset({"blockNumber"})
_TEXT_KEYS = frozenset({"text", "message", "description", "errorMessage", "url"})
_PATTERNS = (
    (re.compile(r"0x[0-9a-fA-F]{40}"), "<address>"),
    (re.compile(r"0x[0-9a-fA-F]{64}"), "<bytes32>"),
    (re.compile(r"0x(?:[0-9a-fA-F]{2}){65,}"), "<signature>"),
)


def shape(value: Any, key: str | None = None) -> Any:
    """`value` with run-dependent values replaced by placeholders (see the module docstring)."""
    if isinstance(value, dict):
        return {name: shape(item, name) for name, item in value.items() if name != "history"}
    if isinstance(value, list):
        return [shape(item, key) for item in value]
    if key in _ID_KEYS:
        return "<id>"
    if key in _RUN_NUMBER_KEYS and isinstance(value, int):
        return "<number>"
    if isinstance(value, str):
        if key in _TIME_KEYS:
            return "<time>"
        if key in _TEXT_KEYS:
            return "<text>"
        for pattern, placeholder in _PATTERNS:
            if pattern.fullmatch(value):
                return placeholder
    return value
