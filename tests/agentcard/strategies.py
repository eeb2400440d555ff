"""Hypothesis strategies for Agent Card JSON, generated from the ``a2a.types.AgentCard`` descriptors.

Because the strategy walks the descriptors, a field added to the proto is generated without a change here.
``nonempty=True`` produces only cards that a2a-sdk 1.3.0 canonicalizes like the spec: no empty string,
list, map or object anywhere (the SDK strips those), every message with at least one member.
"""

from __future__ import annotations

from typing import Any, cast

from a2a.types import AgentCard
from google.api import field_behavior_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import strategies as st

_MAX_SAFE_INT = 2**53 - 1
_TEXT = st.characters(blacklist_categories=["Cs"])


def card_dicts(*, nonempty: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """Card JSON objects valid for ``ParseDict`` (no ``signatures``)."""
    return _message(cast(Descriptor, AgentCard.DESCRIPTOR), nonempty, skip=frozenset({"signatures"}))


def _message(
    descriptor: Descriptor, nonempty: bool, skip: frozenset[str] = frozenset()
) -> st.SearchStrategy[dict[str, Any]]:
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    oneofs: list[list[FieldDescriptor]] = []
    for oneof in descriptor.oneofs:
        # proto3 `optional` fields sit in a synthetic one-member oneof; only real oneofs are choices.
        if len(oneof.fields) > 1:
            oneofs.append(list(oneof.fields))
    in_oneof = {field.name for group in oneofs for field in group}
    for field in descriptor.fields:
        if field.name in skip or field.name in in_oneof:
            continue
        target = required if nonempty and _is_required(field) else optional
        target[field.json_name] = _field(field, nonempty)
    strategy = st.fixed_dictionaries(required, optional=optional)
    for group in oneofs:
        choices = [st.fixed_dictionaries({field.json_name: _field(field, nonempty)}) for field in group]
        pick = st.one_of(*choices) if nonempty else st.one_of(st.just({}), *choices)
        strategy = st.builds(lambda base, chosen: {**base, **chosen}, strategy, pick)
    return strategy.filter(bool) if nonempty else strategy


def _field(field: FieldDescriptor, nonempty: bool) -> st.SearchStrategy[Any]:
    min_size = 1 if nonempty else 0
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        value = _single(entry.fields_by_name["value"], nonempty)
        return st.dictionaries(st.text(_TEXT, min_size=1, max_size=6), value, min_size=min_size, max_size=3)
    if field.is_repeated:
        return st.lists(_single(field, nonempty), min_size=min_size, max_size=3)
    return _single(field, nonempty)


def _single(field: FieldDescriptor, nonempty: bool) -> st.SearchStrategy[Any]:
    message = field.message_type
    if message is not None:
        if message.full_name == "google.protobuf.Struct":
            return _struct(nonempty)
        return _message(message, nonempty)
    if field.type == FieldDescriptor.TYPE_BOOL:
        # Without presence, false is the default and dropped by both sides; with it, false is a value.
        return st.just(True) if nonempty and not field.has_presence else st.booleans()
    if field.type == FieldDescriptor.TYPE_STRING:
        return st.text(_TEXT, min_size=1 if nonempty else 0, max_size=12)
    raise NotImplementedError(f"no strategy for {field.full_name} (type {field.type}); extend strategies.py")


def _struct(nonempty: bool) -> st.SearchStrategy[dict[str, Any]]:
    min_size = 1 if nonempty else 0
    scalars = st.one_of(
        # a2a-sdk drops nulls together with empties, so nonempty cards carry none.
        st.nothing() if nonempty else st.none(),
        st.booleans(),
        st.integers(-_MAX_SAFE_INT, _MAX_SAFE_INT),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(_TEXT, min_size=min_size, max_size=8),
    )
    values = st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, min_size=min_size, max_size=3),
            st.dictionaries(st.text(_TEXT, max_size=6), inner, min_size=min_size, max_size=3),
        ),
        max_leaves=8,
    )
    return st.dictionaries(st.text(_TEXT, max_size=6), values, min_size=min_size, max_size=4)


def _is_required(field: FieldDescriptor) -> bool:
    return field_behavior_pb2.REQUIRED in field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
