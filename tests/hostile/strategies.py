"""Hypothesis strategies shared by the hostile-input tests: arbitrary JSON, broken valid documents, TOML.

`json_values` is what `json.loads` can return (lone surrogates, NUL and huge integers included);
`mutated(make)` takes a valid document and breaks one subtree of it (replace, delete or add), so generated
input gets past the outer checks and reaches the deep validators, where bugs live. `printable_text` is
text that UTF-8 can carry; `toml_values` and `toml_key` / `toml_value` write generated TOML documents.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

__all__ = ["json_values", "mutated", "printable_text", "toml_key", "toml_value", "toml_values"]

# Every code point json.loads can hand back, lone surrogates and control characters included.
_json_text = st.text(st.characters(exclude_categories=()), max_size=40)
# What can be written to a UTF-8 file or an HTTP body (no lone surrogates).
printable_text = st.text(st.characters(codec="utf-8"), max_size=40)

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**300), max_value=2**300)
    | st.floats()
    | _json_text
)
json_values: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_json_text, children, max_size=4),
    max_leaves=20,
)


def _paths_of(node: object, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    # Every path (tuple of keys and indexes) into `node`, the root `()` first.
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths_of(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths_of(child, (*prefix, index))
    return found


@st.composite
def _mutation(draw: st.DrawFn, document: Any, replacements: st.SearchStrategy[Any]) -> Any:
    mutated_document = copy.deepcopy(document)
    candidates = _paths_of(mutated_document)[1:]
    if not candidates:
        return draw(replacements)
    path = draw(st.sampled_from(candidates))
    parent: Any = mutated_document
    for step in path[:-1]:
        parent = parent[step]
    operation = draw(st.sampled_from(["replace", "delete", "add"]))
    if operation == "replace":
        parent[path[-1]] = draw(replacements)
    elif operation == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(_json_text)] = draw(replacements)
    else:
        parent.append(draw(replacements))
    return mutated_document


def mutated(
    makers: Sequence[Callable[[], Any]],
    replacements: st.SearchStrategy[Any] = json_values,
    *,
    rounds: int = 2,
) -> st.SearchStrategy[Any]:
    """Valid documents from `makers`, as they are (a quarter of the time) or with 1 to `rounds` subtrees
    broken."""
    valid = st.sampled_from(list(makers)).map(lambda make: make())

    @st.composite
    def broken(draw: st.DrawFn) -> Any:
        document = draw(valid)
        for _ in range(draw(st.integers(1, rounds))):
            document = draw(_mutation(document, replacements))
        return document

    return st.one_of(valid, broken(), broken(), broken())


# -- TOML ---------------------------------------------------------------------------------------------

_BARE_KEY = st.from_regex(r"\A[A-Za-z0-9_-]{1,12}\Z")


def _toml_string(text: str) -> str:
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def toml_key(key: str) -> str:
    """`key` as a TOML key: bare when it can be, quoted otherwise."""
    if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key):
        return key
    return _toml_string(key)


def toml_value(value: object) -> str:
    """`value` (str, bool, int, float including nan and inf, list or str-keyed dict) as a TOML value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return json.dumps(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


_toml_scalars = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | printable_text
    | _BARE_KEY
)
toml_values: st.SearchStrategy[Any] = st.recursive(
    _toml_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_BARE_KEY, children, max_size=3),
    max_leaves=8,
)
