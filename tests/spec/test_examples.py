"""Every example of the specification is a valid document of the type its header names.

A2A objects must parse into the a2a-sdk's A2A 1.0 protobuf types with unknown fields refused; extension
objects must validate against `spec/schema/` and decode with `a2a_x402.decode` back to themselves; the
signed Agent Card must verify with the published JWK Set; and the examples must follow the state machine
and the declaration rules the specification states.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from a2a.compat.v0_3 import types as types_0_3
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
)
from a2a.utils.errors import A2A_ERROR_MAPPING, JSON_RPC_ERROR_CODE_MAP
from google.protobuf import any_pb2
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message as ProtoMessage
from google.rpc import error_details_pb2
from pydantic import BaseModel

from a2a_x402.agentcard import CardVerifier, SignaturePolicy, parse_jwks
from a2a_x402.devchain import EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS, UPTO_PERMIT2_PROXY_ADDRESS
from a2a_x402.extension import EXTENSION_URI, Dialect, PaymentStatus, decode, encode
from spec import Example

from .support import (
    JSON,
    example,
    examples,
    extension_object,
    messages,
    schema_errors,
    statuses,
    v0_2_form,
)

# method -> (params type, result type)
_METHODS: dict[str, tuple[type[ProtoMessage], type[ProtoMessage]]] = {
    "SendMessage": (SendMessageRequest, SendMessageResponse),
    "SendStreamingMessage": (SendMessageRequest, StreamResponse),
    "GetTask": (GetTaskRequest, Task),
    "CancelTask": (CancelTaskRequest, Task),
}
# A2A 0.3 methods (§13's v0.2 form) -> (request, success response) of the a2a-sdk's 0.3 models.
_METHODS_0_3: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "message/send": (types_0_3.SendMessageRequest, types_0_3.SendMessageSuccessResponse),
}
_RPC_CODE_OF_REASON = {
    mapping.reason: JSON_RPC_ERROR_CODE_MAP[error] for error, mapping in A2A_ERROR_MAPPING.items()
}
_ERROR_INFO_URL = "type.googleapis.com/" + error_details_pb2.ErrorInfo.DESCRIPTOR.full_name
# The task state each merchant status travels with (§5.2, §7.2).
_STATE_OF_STATUS = {
    "payment-required": "TASK_STATE_INPUT_REQUIRED",
    "payment-verified": "TASK_STATE_WORKING",
    "payment-completed": "TASK_STATE_COMPLETED",
    "payment-failed": "TASK_STATE_FAILED",
    "payment-rejected": "TASK_STATE_CANCELED",
}
_CLIENT_STATUSES = {"payment-submitted", "payment-rejected"}
_TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
_ALL = examples()
# The A2A 1.0 examples: those whose header names no A2A 0.3 method. Those of the v0.2 form (§13) are held
# to being exactly an A2A 1.0 example on the 0.3 wire (below), so the rules checked on the 1.0 form hold for
# them too; those of the embedded flow's v0.2 form (§20.7) are checked in test_ap2.
_A2A_1_0 = [item for item in _ALL if item.type.split(" ")[0] not in _METHODS_0_3]


def _parse(document: Any, proto: type[ProtoMessage]) -> ProtoMessage:
    return ParseDict(document, proto(), ignore_unknown_fields=False)


def _check_request(document: JSON, method: str) -> None:
    assert document.keys() == {"jsonrpc", "id", "method", "params"}
    assert document["jsonrpc"] == "2.0"
    assert document["method"] == method
    _parse(document["params"], _METHODS[method][0])


def _check_response(document: JSON, method: str) -> None:
    assert document.keys() == {"jsonrpc", "id", "result"}
    assert document["jsonrpc"] == "2.0"
    _parse(document["result"], _METHODS[method][1])


def _check_error(document: JSON) -> None:
    assert document.keys() == {"jsonrpc", "id", "error"}
    error = document["error"]
    assert error.keys() == {"code", "message", "data"}
    infos = [ParseDict(detail, any_pb2.Any(), ignore_unknown_fields=False) for detail in error["data"]]
    assert infos and infos[0].type_url == _ERROR_INFO_URL
    info = error_details_pb2.ErrorInfo()
    assert infos[0].Unpack(info)
    assert info.domain == "a2a-protocol.org"
    assert error["code"] == _RPC_CODE_OF_REASON[info.reason]


def _check_stream(document: Any) -> None:
    assert isinstance(document, list) and document
    assert len({event["id"] for event in document}) == 1, "every event of a stream answers the same request"
    for event in document:
        _check_response(event, "SendStreamingMessage")


def _check_0_3(document: JSON, method: str, role: str) -> None:
    # The 0.3 models ignore members they do not know, so the document must also be exactly their dump.
    model = _METHODS_0_3[method][0 if role == "request" else 1]
    dumped = model.model_validate(document).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped == document


def _check(item: Example) -> None:
    document = item.document
    kind = item.type.split(" ")
    if len(kind) == 2 and kind[0] in _METHODS_0_3 and kind[1] in {"request", "response"}:
        _check_0_3(document, *kind)
    elif kind == ["AgentCard"]:
        _parse(document, AgentCard)
    elif kind == ["JWKS"]:
        assert len(parse_jwks(document)) == len(document["keys"]) >= 1
    elif len(kind) == 2 and kind[0] in _METHODS:
        method, role = kind
        if role == "request":
            _check_request(document, method)
        elif role == "response":
            _check_response(document, method)
        elif role == "http-request":
            _parse(document, _METHODS[method][0])
        elif role == "http-response":
            _parse(document, _METHODS[method][1])
        elif role == "error":
            _check_error(document)
        elif role == "stream" and method == "SendStreamingMessage":
            _check_stream(document)
        else:
            pytest.fail(f"{item.name}: unknown example type {item.type!r}")
    else:
        pytest.fail(f"{item.name}: unknown example type {item.type!r}")


@pytest.mark.parametrize("item", _ALL, ids=lambda item: item.name)
def test_example_is_a_valid_document_of_its_type(item: Example) -> None:
    _check(item)


@pytest.mark.parametrize(
    ("document", "proto"),
    [
        (
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "x"}]}},
            SendMessageRequest,
        ),
        ({"task": {"id": "t", "status": {"state": "input-required"}}}, SendMessageResponse),
        (
            {
                "statusUpdate": {
                    "taskId": "t",
                    "contextId": "c",
                    "status": {"state": "TASK_STATE_WORKING"},
                    "final": True,
                }
            },
            StreamResponse,
        ),
    ],
    ids=["kind-on-part", "0.3-state-spelling", "final-flag"],
)
def test_the_proto_check_refuses_a2a_0_3_forms(document: JSON, proto: type[ProtoMessage]) -> None:
    # The check above is only worth something if it catches what v0.2's examples got wrong.
    with pytest.raises(ParseError, match="kind|input-required|final"):
        _parse(document, proto)


def _extension_messages() -> list[tuple[str, JSON, JSON]]:
    found = []
    for item in _A2A_1_0:
        for message in messages(item.document):
            value = extension_object(message)
            if value is not None:
                found.append((item.name, message, value))
    return found


_EXTENSION_MESSAGES = _extension_messages()


@pytest.mark.parametrize(
    ("name", "message", "value"),
    _EXTENSION_MESSAGES,
    ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(_EXTENSION_MESSAGES)],
)
def test_extension_object_validates_and_decodes_to_itself(name: str, message: JSON, value: JSON) -> None:
    assert schema_errors(f"{value['status']}.json", value) == []
    assert schema_errors("extension-object.json", value) == []
    data = decode(message["metadata"], Dialect.V03)
    assert data is not None and data.status.value == value["status"]
    # Re-encoding gives the same object: the example has no spelling the implementation would change
    # (unchecksummed addresses, upper-case hashes, empty optional members, float integers).
    assert encode(data, Dialect.V03) == {EXTENSION_URI: value}
    assert EXTENSION_URI in message.get("extensions", []), "a message with extension data lists the URI"


def test_every_status_has_an_example() -> None:
    shown = {value["status"] for _, _, value in _EXTENSION_MESSAGES}
    assert shown == {status.value for status in PaymentStatus}


@pytest.mark.parametrize("name", sorted({name for name, _, _ in _EXTENSION_MESSAGES}))
def test_statuses_ride_with_their_task_state(name: str) -> None:
    document = example(name)
    for status in statuses(document):
        value = extension_object(status.get("message", {}))
        if value is not None:
            assert status["message"]["role"] == "ROLE_AGENT"
            assert status["state"] == _STATE_OF_STATUS[value["status"]]
    for message in messages(document):
        value = extension_object(message)
        if value is not None and message["role"] == "ROLE_USER":
            assert value["status"] in _CLIENT_STATUSES
            assert message.get("taskId"), "a client payment message names its task"


def _tasks(document: Any) -> list[JSON]:
    if isinstance(document, list):
        return list(itertools.chain.from_iterable(_tasks(event) for event in document))
    result = document.get("result", document) if isinstance(document, dict) else {}
    if "task" in result:
        return [result["task"]]
    return [result] if "status" in result and "id" in result else []


@pytest.mark.parametrize("item", _A2A_1_0, ids=lambda item: item.name)
def test_artifacts_only_with_completed_payments(item: Example) -> None:
    # §7.3 rule 4: nothing paid for is delivered before the settlement succeeded. The embedded flow's
    # checkout artifact (§20.3) is the offer, not work.
    for task in _tasks(item.document):
        if [artifact for artifact in task.get("artifacts", []) if artifact["artifactId"] != "ap2-checkout"]:
            value = extension_object(task["status"]["message"])
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            assert value is not None and value["status"] == "payment-completed"
    document = item.document
    if isinstance(document, list):
        results = [event["result"] for event in document]
        updates = [index for index, result in enumerate(results) if "artifactUpdate" in result]
        for index in updates:
            later = [r["statusUpdate"]["status"] for r in results[index + 1 :] if "statusUpdate" in r]
            assert later and later[-1]["state"] == "TASK_STATE_COMPLETED"
            completed = extension_object(later[-1]["message"])
            assert completed is not None and completed["status"] == "payment-completed"
        last = results[-1]
        state = (last.get("statusUpdate") or last.get("task") or {}).get("status", {}).get("state")
        assert state in _TERMINAL | {"TASK_STATE_INPUT_REQUIRED"}, (
            "a stream ends on a terminal or interrupted state"
        )


def _card() -> JSON:
    card: JSON = example("agent-card.json")
    return card


def _declaration() -> JSON:
    declarations: list[JSON] = [e for e in _card()["capabilities"]["extensions"] if e["uri"] == EXTENSION_URI]
    assert len(declarations) == 1
    return declarations[0]


def test_card_declares_the_extension_with_valid_params() -> None:
    declaration = _declaration()
    assert declaration["required"] is True
    assert schema_errors("card-params.json", declaration["params"]) == []


def test_card_params_cover_every_tenant_and_network() -> None:
    params = _declaration()["params"]
    tenants = {interface.get("tenant", "") for interface in _card()["supportedInterfaces"]}
    assert {entry.get("tenant", "") for entry in params["payTo"]} == tenants
    named = {entry["network"] for entry in params["payTo"] + params["assets"]}
    assert named <= set(params["networks"])


def test_every_term_in_the_examples_is_allowed_by_the_card() -> None:
    # §3: terms use only listed networks and assets, and a payTo listed for the request's tenant.
    params = _declaration()["params"]
    pay_to = {(entry.get("tenant", ""), entry["network"], entry["address"]) for entry in params["payTo"]}
    assets = {(entry["network"], entry["address"]) for entry in params["assets"]}
    offered = [
        term
        for _, _, value in _EXTENSION_MESSAGES
        for term in value.get("required", {}).get("accepts", []) + [value.get("payload", {}).get("accepted")]
        if term
    ]
    assert offered
    for term in offered:
        assert (term["network"], term["asset"]) in assets
        assert ("", term["network"], term["payTo"]) in pay_to


async def test_card_signature_verifies_with_the_published_key() -> None:
    verifier = CardVerifier(
        trusted_keys=parse_jwks(example("jwks.json")).values(), policy=SignaturePolicy.REQUIRE
    )
    result = await verifier.verify(_card())
    assert result.verified


async def test_card_signature_covers_the_pay_to_list() -> None:
    card = _card()
    card["capabilities"]["extensions"][0]["params"]["payTo"][0]["address"] = "0x" + "11" * 20
    verifier = CardVerifier(trusted_keys=parse_jwks(example("jwks.json")).values())
    result = await verifier.verify(card)
    assert not result.verified


def _payments() -> list[JSON]:
    return [value["payload"] for _, _, value in _EXTENSION_MESSAGES if value["status"] == "payment-submitted"]


def test_examples_show_every_kind_of_payment() -> None:
    # §6.2: EIP-3009, Permit2 `exact` and `upto`, each at least once.
    kinds = {(p["accepted"]["scheme"], "permit2Authorization" in p["payload"]) for p in _payments()}
    assert kinds == {("exact", False), ("exact", True), ("upto", True)}


@pytest.mark.parametrize("payment", _payments(), ids=lambda p: p["accepted"]["extra"]["offerId"])
def test_every_example_payment_pays_its_accepted_entry(payment: JSON) -> None:
    # §6.2 and §15.2: the authorization pays exactly the entry it names, to the scheme's proxy for Permit2.
    accepted, signed = payment["accepted"], payment["payload"]
    if "authorization" in signed:
        authorization = signed["authorization"]
        assert "assetTransferMethod" not in accepted["extra"]
        assert (authorization["to"], authorization["value"]) == (accepted["payTo"], accepted["amount"])
        return
    authorization = signed["permit2Authorization"]
    assert authorization["permitted"] == {"token": accepted["asset"], "amount": accepted["amount"]}
    assert authorization["witness"]["to"] == accepted["payTo"]
    if accepted["scheme"] == "upto":
        assert authorization["spender"] == UPTO_PERMIT2_PROXY_ADDRESS
        assert authorization["witness"]["facilitator"] == accepted["extra"]["facilitatorAddress"]
    else:
        assert accepted["extra"]["assetTransferMethod"] == "permit2"
        assert authorization["spender"] == EXACT_PERMIT2_PROXY_ADDRESS
        assert "facilitator" not in authorization["witness"]
    sponsoring = payment.get("extensions", {}).get("eip2612GasSponsoring")
    if sponsoring is not None:
        # §7.8: an approval of Permit2, by the payer, for the token and exactly the permitted amount.
        info = sponsoring["info"]
        assert (info["from"], info["asset"], info["spender"], info["amount"]) == (
            authorization["from"],
            accepted["asset"],
            PERMIT2_ADDRESS,
            accepted["amount"],
        )


def _offered_maxima() -> set[str]:
    return {
        entry["amount"]
        for _, _, value in _EXTENSION_MESSAGES
        for entry in value.get("required", {}).get("accepts", [])
        if entry["scheme"] == "upto"
    }


_USAGES = [(name, value) for name, _, value in _EXTENSION_MESSAGES if "usage" in value]


def test_usage_rides_only_on_completions() -> None:
    # §6.4 rule 4; the examples show a metered completion that charged and one that charged nothing.
    assert {value["status"] for _, value in _USAGES} == {"payment-completed"}
    assert {value["usage"]["settled"] == "0" for _, value in _USAGES} == {True, False}


@pytest.mark.parametrize(("name", "value"), _USAGES, ids=[name for name, _ in _USAGES])
def test_usage_adds_up_and_agrees_with_its_receipt(name: str, value: JSON) -> None:
    # §6.4 rules 1 to 3 and §7.7: never above the maximum; the receipt settled exactly `settled`.
    usage, receipt = value["usage"], value["receipts"][-1]
    for item in usage["items"]:
        assert int(item["amount"]) == int(item["quantity"]) * int(item["unitPrice"])
    total = sum(int(item["amount"]) for item in usage["items"])
    assert int(usage["settled"]) == min(total, int(usage["maximum"]))
    assert usage["maximum"] in _offered_maxima()
    assert receipt["success"] is True and receipt["amount"] == usage["settled"]
    # §6.3: a settlement of 0 sends no transaction; any other names one.
    assert (receipt["transaction"] == "") == (usage["settled"] == "0")


_NEW_KINDS = [
    (name, message)
    for name, message, value in _EXTENSION_MESSAGES
    if name.startswith(("metered.", "permit2.")) and value["status"] != "payment-failed"
]


@pytest.mark.parametrize(("name", "message"), _NEW_KINDS, ids=[name for name, _ in _NEW_KINDS])
def test_metered_and_permit2_objects_ride_v0_2_as_x402_v2(name: str, message: JSON) -> None:
    # §13: on v0.2 they are the same x402 v2 documents under flat keys, usage as x402.payment.usage.
    data = decode(message["metadata"], Dialect.V03)
    assert data is not None
    flat = encode(data, Dialect.V02)
    value = extension_object(message)
    assert value is not None
    assert flat == {f"x402.payment.{member}": item for member, item in value.items()}
    assert decode(flat, Dialect.V02) == data


_V0_2_FORMS = [item for item in _ALL if item.name.startswith("v0.2.")]


def test_the_v0_2_form_has_examples() -> None:
    assert {item.name for item in _V0_2_FORMS} >= {
        "v0.2.metered.payment-required.response.json",
        "v0.2.metered.payment-submitted.request.json",
        "v0.2.metered.payment-completed.response.json",
        "v0.2.permit2.payment-submitted.request.json",
    }


@pytest.mark.parametrize("item", _V0_2_FORMS, ids=lambda item: item.name)
def test_a_v0_2_example_is_its_a2a_1_0_example_on_the_0_3_wire(item: Example) -> None:
    # §13: the same x402 v2 documents as the A2A 1.0 example of the same name, under the flat keys.
    original = next(candidate for candidate in _ALL if candidate.name == item.name.removeprefix("v0.2."))
    assert item.document == v0_2_form(original.document, original.type.split(" ")[1])
    for message in messages(item.document):
        data = decode(message["metadata"], Dialect.V02)
        assert data is not None
        assert encode(data, Dialect.V02) == message["metadata"]
