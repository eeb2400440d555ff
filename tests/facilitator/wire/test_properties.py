"""Property tests: whatever JSON comes in, the parse entry points raise WireError or nothing else."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_x402.facilitator.wire import (
    PaymentPayload,
    Reason,
    SettleResponse,
    SupportedResponse,
    VerifyResponse,
    WireError,
    parse_payment_payload,
    parse_payment_required,
    parse_payment_requirements,
    parse_settle_request,
    parse_verify_request,
)

from . import documents as docs

# Lone surrogates, NUL and other control characters included: json.loads can produce all of them.
_text = st.text(st.characters(exclude_categories=()), max_size=80)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**300), max_value=2**300)
    | st.floats()
    | _text
    | st.sampled_from(
        ["0", "01", "0x", "0x" + "ab" * 32, docs.MERCHANT, docs.MERCHANT.lower(), "eip155:1", "base"]
    )
)
json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_text, children, max_size=5),
    max_leaves=30,
)

_KNOWN_KEYS = [
    "x402Version",
    "paymentPayload",
    "paymentRequirements",
    "payload",
    "accepted",
    "accepts",
    "resource",
    "authorization",
    "signature",
    "from",
    "to",
    "value",
    "validAfter",
    "validBefore",
    "nonce",
    "scheme",
    "network",
    "amount",
    "asset",
    "payTo",
    "maxTimeoutSeconds",
    "extra",
    "extensions",
    "kinds",
    "signers",
]
# Objects built from the field names the models know, so that random values reach deep validators.
known_shaped = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(_KNOWN_KEYS) | _text, children, max_size=6)
    ),
    max_leaves=40,
)

ENTRY_POINTS: list[Callable[[object], object]] = [
    parse_payment_payload,
    parse_payment_required,
    parse_verify_request,
    parse_settle_request,
    lambda data: parse_payment_requirements(data, 1),
    lambda data: parse_payment_requirements(data, 2),
    PaymentPayload.from_wire,
    VerifyResponse.from_wire,
    SettleResponse.from_wire,
    SupportedResponse.from_wire,
]
PARSE_REASONS = {Reason.INVALID_PAYLOAD, Reason.INVALID_PAYMENT_REQUIREMENTS, Reason.INVALID_X402_VERSION}


def _parses_or_raises_wire_error(data: object) -> None:
    for parse in ENTRY_POINTS:
        try:
            parse(data)
        except WireError as exc:
            assert exc.reason in PARSE_REASONS
            assert len(exc.message) < 1000


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_random_json_raises_only_wire_error(data: object) -> None:
    _parses_or_raises_wire_error(data)


@settings(max_examples=300, deadline=None)
@given(known_shaped)
def test_random_objects_with_known_keys_raise_only_wire_error(data: object) -> None:
    _parses_or_raises_wire_error(data)
    _parses_or_raises_wire_error({"x402Version": 2, "paymentPayload": data, "paymentRequirements": data})
    _parses_or_raises_wire_error({"x402Version": 1, "paymentPayload": data, "paymentRequirements": data})


def _paths(node: object, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*prefix, index))
    return found


VALID_DOCUMENTS = [
    docs.verify_request_v2(),
    docs.verify_request_v1(),
    docs.payment_required_v2(),
    docs.payment_required_v1(),
    docs.supported_v2(),
    docs.settle_success_v2(),
]


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(VALID_DOCUMENTS), st.data())
def test_mutated_valid_documents_raise_only_wire_error(document: dict[str, Any], data: st.DataObject) -> None:
    mutated = copy.deepcopy(document)
    path = data.draw(st.sampled_from(_paths(mutated)[1:]))
    parent: Any = mutated
    for step in path[:-1]:
        parent = parent[step]
    operation = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if operation == "replace":
        parent[path[-1]] = data.draw(json_values)
    elif operation == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[data.draw(_text)] = data.draw(json_values)
    else:
        parent.append(data.draw(json_values))
    _parses_or_raises_wire_error(mutated)
