from __future__ import annotations

import re
from collections import Counter

from a2a.compat.v0_3 import types as types_v03
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentCardSignature,
    AgentInterface,
    Role,
    SendMessageConfiguration,
    TaskState,
)
from x402.mechanisms.evm.v1.constants import V1_NETWORK_CHAIN_IDS as SDK_V1_NETWORK_CHAIN_IDS

from a2a_x402.extension import (
    EXTENSION_URI,
    EXTENSION_URI_V02,
    LITERAL_MAPPINGS,
    LiteralCategory,
    LiteralMapping,
    literal_map,
)


def _rows(category: LiteralCategory) -> list[LiteralMapping]:
    return [row for row in LITERAL_MAPPINGS if row.category is category]


def test_every_category_has_rows_and_rows_are_grouped_in_category_order() -> None:
    order = [row.category for row in LITERAL_MAPPINGS]
    assert list(dict.fromkeys(order)) == list(LiteralCategory)


def test_no_row_is_empty_or_duplicated() -> None:
    for row in LITERAL_MAPPINGS:
        assert row.v02 is not None or row.v03 is not None
        assert (row.v02 is not None and row.v03 is not None) or row.note, row
    counts = Counter((row.category, row.v02) for row in LITERAL_MAPPINGS if row.v02 is not None)
    assert [key for key, n in counts.items() if n > 1] == []


def test_task_states_cover_both_enums_exactly_as_the_sdk_converts_them() -> None:
    states = literal_map(LiteralCategory.TASK_STATE)
    assert set(states) == {s.value for s in types_v03.TaskState}
    assert set(states.values()) == set(TaskState.keys())
    assert len(states) == 9
    assert states["input-required"] == "TASK_STATE_INPUT_REQUIRED"
    assert states["unknown"] == "TASK_STATE_UNSPECIFIED"


def test_roles() -> None:
    assert literal_map(LiteralCategory.ROLE) == {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
    assert {r.value for r in types_v03.Role} == {"user", "agent"}
    assert {"ROLE_USER", "ROLE_AGENT"} <= set(Role.keys())


def test_parts_and_discriminators() -> None:
    parts = literal_map(LiteralCategory.PART)
    assert parts['{"kind": "text", "text": "…"}'] == '{"text": "…"}'
    assert parts['{"kind": "data", "data": {…}}'] == '{"data": {…}}'
    assert len(parts) == 4
    events = literal_map(LiteralCategory.STREAM_EVENT)
    assert events['{"kind": "status-update", …}'] == '{"statusUpdate": {…}}'
    assert events['{"kind": "artifact-update", …}'] == '{"artifactUpdate": {…}}'
    assert set(literal_map(LiteralCategory.KIND).values()) == {'{"task": {…}}', '{"message": {…}}'}
    assert [row.v02 for row in _rows(LiteralCategory.STREAM_END)] == ['"final": true', '"final": false']


def test_metadata_keys_map_flat_keys_onto_members_of_the_uri_object() -> None:
    keys = literal_map(LiteralCategory.METADATA)
    for field in ("status", "required", "payload", "receipts", "error"):
        assert keys[f'metadata["x402.payment.{field}"]'] == f'metadata["{EXTENSION_URI}"]["{field}"]'
    assert keys[f'"extensions": ["{EXTENSION_URI_V02}"]'] == f'"extensions": ["{EXTENSION_URI}"]'


def test_headers_and_uris() -> None:
    headers = literal_map(LiteralCategory.HEADER)
    assert headers[f"X-A2A-Extensions: {EXTENSION_URI_V02}"] == f"A2A-Extensions: {EXTENSION_URI}"
    assert headers["A2A-Version: 0.3"] == "A2A-Version: 1.0"
    assert literal_map(LiteralCategory.EXTENSION_URI) == {EXTENSION_URI_V02: EXTENSION_URI}


def test_jsonrpc_methods() -> None:
    methods = literal_map(LiteralCategory.JSONRPC_METHOD)
    assert methods["message/send"] == "SendMessage"
    assert methods["message/stream"] == "SendStreamingMessage"
    assert methods["tasks/resubscribe"] == "SubscribeToTask"
    assert len(methods) == 10


def test_x402_fields() -> None:
    fields = literal_map(LiteralCategory.X402_FIELD)
    assert fields['"x402Version": 1'] == '"x402Version": 2'
    assert fields["PaymentRequirements.maxAmountRequired"] == "PaymentRequirements.amount"
    assert fields["PaymentRequirements.resource"] == "PaymentRequired.resource.url"
    assert fields["PaymentPayload.network"] == "PaymentPayload.accepted.network"


def test_networks_match_the_x402_sdk() -> None:
    networks = literal_map(LiteralCategory.NETWORK)
    assert networks["base"] == "eip155:8453"
    assert networks["base-sepolia"] == "eip155:84532"
    # The x402 Python SDK's own v1 table is an independent source for every EVM name.
    assert networks == {name: f"eip155:{chain_id}" for name, chain_id in SDK_V1_NETWORK_CHAIN_IDS.items()}


def test_literal_map_is_read_only() -> None:
    mapping = literal_map(LiteralCategory.ROLE)
    try:
        mapping["x"] = "y"  # type: ignore[index]
    except TypeError:
        return
    raise AssertionError("literal_map returned a mutable mapping")


def _json_names(literals: str) -> set[str]:
    """The JSON member names written in a table cell (`"name": ...`)."""
    return set(re.findall(r'"([A-Za-z]+)":', literals))


def test_request_and_card_rows_name_real_members_of_both_versions() -> None:
    members_v03 = {
        field.alias or name
        for model in (
            types_v03.AgentCard,
            types_v03.AgentCardSignature,
            types_v03.AgentInterface,
            types_v03.MessageSendConfiguration,
        )
        for name, field in model.model_fields.items()
    } | {"configuration"}
    members_v10 = {
        field.json_name
        for proto in (
            AgentCard,
            AgentCardSignature,
            AgentInterface,
            AgentCapabilities,
            SendMessageConfiguration,
        )
        for field in proto.DESCRIPTOR.fields
    } | {"configuration"}
    rows = _rows(LiteralCategory.REQUEST_FIELD) + _rows(LiteralCategory.AGENT_CARD)
    assert rows
    for row in rows:
        if row.v02 is not None:
            names = _json_names(row.v02)
            assert names and names <= {_camel(name) for name in members_v03}, row.v02
        if row.v03 is not None:
            names = _json_names(row.v03)
            assert names and names <= members_v10, row.v03


def test_blocking_is_inverted_into_return_immediately() -> None:
    assert literal_map(LiteralCategory.REQUEST_FIELD) == {
        '"configuration": {"blocking": true}': '"configuration": {"returnImmediately": false}',
        '"configuration": {"blocking": false}': '"configuration": {"returnImmediately": true}',
    }


def test_receipt_rows_say_what_x402_v2_added() -> None:
    added = {row.v03 for row in _rows(LiteralCategory.X402_FIELD) if row.v02 is None}
    assert {"SettleResponse.amount", "SettleResponse.extensions"} <= added
    assert literal_map(LiteralCategory.X402_FIELD)["SettleResponse.payer"] == "SettleResponse.payer"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
