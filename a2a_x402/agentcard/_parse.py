"""Safe JSON parsing for bytes that came from a counterpart: Agent Cards, JWK Sets, JWS headers.

Usage::

    card_json = parse_card_json(response.content)   # dict, ready for `CardVerifier.verify`

Invariants:

* The size is checked on the raw bytes, before decoding, so an oversized body costs no parsing.
* A JSON object that repeats a member name is refused. Parsers disagree on which copy wins, so a
  signature checked over one reading could be trusted by code that reads the other.
* ``NaN`` / ``Infinity`` (accepted by Python's ``json`` but not JSON) and numbers that overflow a double
  (``1e400``, which Python would read as infinity) are refused.
* More than ``MAX_NESTING`` levels of arrays/objects are refused before parsing (see ``_check_nesting``).
* Numbers are returned as Python parses them (exact ``int``, ``float``); whether they have a canonical
  form is decided by canonicalization, not here.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

from ._errors import CardParseError, CardTooLargeError, DuplicateKeyError

__all__ = ["MAX_CARD_BYTES", "MAX_NESTING", "parse_card_json"]

MAX_CARD_BYTES = 256 * 1024
"""Default size limit for a served Agent Card: far above any real card, far below a memory problem."""

MAX_NESTING = 128
"""Most arrays/objects open at once; the same bound canonicalization (and a2a-sdk's JCS) applies."""

# A JSON string (unrolled loop, linear time) and the four bracket characters.
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET_RE = re.compile(r"[\[\]{}]")


def parse_card_json(data: bytes, *, max_bytes: int = MAX_CARD_BYTES) -> dict[str, Any]:
    """Parse the bytes of an Agent Card into a JSON object, refusing anything ambiguous.

    Args:
        data: The HTTP body exactly as received.
        max_bytes: Refuse bodies longer than this, without decoding them.

    Returns:
        The card as a ``dict`` (members in document order).

    Raises:
        CardTooLargeError: ``data`` is longer than ``max_bytes``.
        DuplicateKeyError: an object repeats a member name.
        CardParseError: not UTF-8, not JSON, nested too deeply, or not a JSON object.
    """
    return load_json_object(data, max_bytes=max_bytes, what="agent card")


def load_json_object(data: bytes, *, max_bytes: int, what: str) -> dict[str, Any]:
    """Parse ``data`` as one JSON object with the rules of this module; ``what`` names it in errors."""
    if len(data) > max_bytes:
        raise CardTooLargeError(f"{what} is {len(data)} bytes, over the limit of {max_bytes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CardParseError(f"{what} is not UTF-8: {exc.reason} at byte {exc.start}") from exc
    _check_nesting(text, what)
    try:
        value = json.loads(
            text, object_pairs_hook=_unique_object, parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except json.JSONDecodeError as exc:
        raise CardParseError(
            f"{what} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except CardParseError:
        raise
    except ValueError as exc:
        # Python refuses integer literals of more than 4300 digits with a plain ValueError.
        raise CardParseError(f"{what} holds a number Python cannot read: {exc}") from exc
    if not isinstance(value, dict):
        raise CardParseError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _check_nesting(text: str, what: str) -> None:
    """Refuse more than ``MAX_NESTING`` open arrays/objects before ``json.loads`` recurses into them.

    ``json``'s C scanner relies on the interpreter's recursion limit to stop, and libraries in this process
    raise it (py_ecc, pulled in by web3, sets 100000), at which point deep input overflows the C stack and
    kills the process. Brackets inside strings are not counted.
    """
    depth = 0
    for match in _BRACKET_RE.finditer(_STRING_RE.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise CardParseError(f"{what} is nested more than {MAX_NESTING} levels deep")
        else:
            depth -= 1


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise DuplicateKeyError(f"duplicate member {key!r} in a JSON object")
        obj[key] = value
    return obj


def _refuse_constant(name: str) -> NoReturn:
    raise CardParseError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise CardParseError(f"{text} is out of the range of a JSON number")
    return value
