"""`WireError`, the one exception of the wire types, and its construction from pydantic errors.

Messages name the offending field by its wire path (`paymentPayload.payload.authorization.nonce`,
`accepts[0].payTo`) and say what was expected. They never quote the input: a payload is
attacker-controlled and may be megabytes long, and messages end up in logs and HTTP answers.
Field names that come from the input (unknown keys) are shortened and escaped for the same reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import ValidationError

from ._reasons import Reason

__all__ = ["VERSION_ERROR_TYPE", "WireError", "json_type_name", "wire_error_from_validation"]

# pydantic error type of a wrong, missing or unknown x402Version (see `_primitives.version`).
VERSION_ERROR_TYPE: Final = "x402_version"

_MAX_SEGMENT_CHARS: Final = 64
_MAX_DETAIL_CHARS: Final = 300
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_$-]{1,64}")


class WireError(ValueError):
    """An x402 document failed strict parsing.

    Attributes:
        reason: the x402 reason code to answer with: `invalid_payload`,
            `invalid_payment_requirements` or `invalid_x402_version` from the parse entry points,
            `invalid_network` from the network helpers.
        path: the wire path of the offending field, "" for the document itself.
        message: a readable sentence, starting with the path when there is one.
    """

    def __init__(self, reason: Reason, detail: str, path: str = "") -> None:
        self.reason = reason
        self.path = path
        self.message = f"{path}: {detail}" if path else detail
        super().__init__(self.message)

    @property
    def code(self) -> str:
        """The stable error code, which is the x402 reason code."""
        return self.reason.value

    def __repr__(self) -> str:
        return f"WireError(reason={self.reason.value!r}, message={self.message!r})"


def json_type_name(value: object) -> str:
    """Name the JSON type of `value` for a message, without showing the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return f"a Python {type(value).__name__}"


def _format_path(loc: Sequence[int | str]) -> str:
    """Render a pydantic location as a wire path: `accepts[0].payTo`."""
    parts: list[str] = []
    for segment in loc:
        if segment == "[key]":
            # pydantic's marker for "the key of the preceding entry"; the detail says so instead.
            continue
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
            continue
        text = segment if _PLAIN_SEGMENT.fullmatch(segment) else _quote(segment)
        parts.append(text if not parts else f".{text}")
    return "".join(parts)


def _quote(segment: str) -> str:
    if len(segment) > _MAX_SEGMENT_CHARS:
        segment = segment[:_MAX_SEGMENT_CHARS] + "…"
    # json.dumps escapes control characters and lone surrogates, so a key cannot forge log lines.
    return json.dumps(segment)


def _detail(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return f"expected an object, got {json_type_name(error.get('input'))}"
    if kind in {"tuple_type", "list_type"}:
        return f"expected an array, got {json_type_name(error.get('input'))}"
    if kind == "too_long":
        return f"too many items (at most {ctx.get('max_length')})"
    if kind == "too_short":
        return f"too few items (at least {ctx.get('min_length')})"
    # Our own validators raise messages that never contain the input; pydantic's built-in
    # messages for the remaining types name only the expectation. Cap the length regardless.
    message = str(error["msg"])
    return message if len(message) <= _MAX_DETAIL_CHARS else message[:_MAX_DETAIL_CHARS] + "…"


def _is_version_problem(error: Mapping[str, Any]) -> bool:
    if error["type"] == VERSION_ERROR_TYPE:
        return True
    loc = error["loc"]
    return error["type"] == "missing" and bool(loc) and loc[-1] == "x402Version"


def wire_error_from_validation(
    exc: ValidationError,
    *,
    default: Reason,
    by_field: Mapping[str, Reason],
) -> WireError:
    """Turn a pydantic ValidationError into one WireError describing its most relevant problem.

    A version problem wins over everything else, because a wrong version explains every other
    mismatch in the document. Otherwise the first problem is reported; the reason comes from
    the top-level field it sits under (`by_field`), else `default`.
    """
    errors = exc.errors(include_url=False, include_context=True, include_input=True)
    chosen = next((e for e in errors if _is_version_problem(e)), errors[0])
    loc = chosen["loc"]
    if _is_version_problem(chosen):
        reason = Reason.INVALID_X402_VERSION
    elif loc and isinstance(loc[0], str) and loc[0] in by_field:
        reason = by_field[loc[0]]
    else:
        reason = default
    detail = _detail(chosen)
    if len(errors) > 1:
        others = len(errors) - 1
        detail += f" (and {others} more problem{'s' if others > 1 else ''})"
    return WireError(reason, detail, _format_path(loc))
