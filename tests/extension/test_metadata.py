from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from a2a.types import Message
from google.protobuf.json_format import MessageToDict, ParseDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_x402.extension import (
    EXTENSION_URI,
    EXTENSION_URI_V01,
    EXTENSION_URI_V02,
    Dialect,
    ExtensionMetadataError,
    MetadataErrorCode,
    PaymentCompletedData,
    PaymentData,
    PaymentErrorCode,
    PaymentFailedData,
    PaymentRejectedData,
    PaymentRequiredData,
    PaymentStatus,
    PaymentSubmittedData,
    PaymentUsage,
    PaymentVerifiedData,
    UsageItem,
    decode,
    encode,
)
from a2a_x402.facilitator.wire import (
    SettleResponse,
    SettleResponseV1,
    parse_payment_payload,
    parse_payment_required,
    parse_permit2_payment_payload,
)

from . import documents as doc

ROOT = f"metadata[{EXTENSION_URI!r}]"
EC = PaymentErrorCode
MC = MetadataErrorCode


def _wire(members: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    """The expected metadata entries: one object under the URI, or flat keys."""
    if dialect is Dialect.V03:
        return {EXTENSION_URI: members}
    return {f"x402.payment.{name}": value for name, value in members.items()}


def _v2(receipt: dict[str, Any]) -> SettleResponse:
    return SettleResponse.from_wire(receipt)


def _usage() -> PaymentUsage:
    return PaymentUsage(
        maximum=50_000,
        settled=1300,
        items=(UsageItem("tokens", 1200, 1, 1200), UsageItem("images", 2, 50, 100)),
    )


@dataclass(frozen=True)
class Case:
    name: str
    data: Callable[[], PaymentData]
    members: Callable[[], dict[str, Any]]
    dialects: tuple[Dialect, ...] = (Dialect.V03, Dialect.V02)


CASES = [
    Case(
        "required",
        lambda: PaymentRequiredData(parse_payment_required(doc.required_v2())),
        lambda: {"status": "payment-required", "required": doc.required_v2()},
    ),
    Case(
        "required-again-after-expiry",
        lambda: PaymentRequiredData(parse_payment_required(doc.required_v2()), EC.EXPIRED_PAYMENT),
        lambda: {"status": "payment-required", "required": doc.required_v2(), "error": "EXPIRED_PAYMENT"},
    ),
    Case(
        "required-x402-v1",
        lambda: PaymentRequiredData(parse_payment_required(doc.required_v1())),
        lambda: {"status": "payment-required", "required": doc.required_v1()},
        (Dialect.V02,),
    ),
    Case(
        "submitted",
        lambda: PaymentSubmittedData(parse_payment_payload(doc.payload_v2())),
        lambda: {"status": "payment-submitted", "payload": doc.payload_v2()},
    ),
    Case(
        "submitted-x402-v1",
        lambda: PaymentSubmittedData(parse_payment_payload(doc.payload_v1())),
        lambda: {"status": "payment-submitted", "payload": doc.payload_v1()},
        (Dialect.V02,),
    ),
    Case(
        "required-permit2-exact",
        lambda: PaymentRequiredData(parse_payment_required(doc.required_permit2())),
        lambda: {"status": "payment-required", "required": doc.required_permit2()},
    ),
    Case(
        "required-upto",
        lambda: PaymentRequiredData(parse_payment_required(doc.required_permit2("upto"))),
        lambda: {"status": "payment-required", "required": doc.required_permit2("upto")},
    ),
    Case(
        "submitted-permit2-exact",
        lambda: PaymentSubmittedData(parse_permit2_payment_payload(doc.permit2_payload())),
        lambda: {"status": "payment-submitted", "payload": doc.permit2_payload()},
    ),
    Case(
        "submitted-upto",
        lambda: PaymentSubmittedData(parse_permit2_payment_payload(doc.permit2_payload("upto"))),
        lambda: {"status": "payment-submitted", "payload": doc.permit2_payload("upto")},
    ),
    Case("verified", PaymentVerifiedData, lambda: {"status": "payment-verified"}),
    Case(
        "verified-settlement-pending",
        lambda: PaymentVerifiedData((_v2(doc.pending_v2()),)),
        lambda: {"status": "payment-verified", "receipts": [doc.pending_v2()]},
    ),
    Case(
        "completed",
        lambda: PaymentCompletedData((_v2(doc.receipt_v2()),)),
        lambda: {"status": "payment-completed", "receipts": [doc.receipt_v2()]},
    ),
    Case(
        "completed-after-retries",
        lambda: PaymentCompletedData((_v2(doc.failed_v2()), _v2(doc.receipt_v2()))),
        lambda: {"status": "payment-completed", "receipts": [doc.failed_v2(), doc.receipt_v2()]},
    ),
    Case(
        "completed-upto-with-usage",
        lambda: PaymentCompletedData((_v2(doc.settled_v2("1300")),), _usage()),
        lambda: {"status": "payment-completed", "receipts": [doc.settled_v2("1300")], "usage": doc.usage()},
    ),
    Case(
        "completed-upto-of-nothing",
        lambda: PaymentCompletedData(
            (_v2({**doc.settled_v2("0"), "transaction": ""}),), PaymentUsage(50_000, 0, ())
        ),
        lambda: {
            "status": "payment-completed",
            "receipts": [{**doc.settled_v2("0"), "transaction": ""}],
            "usage": {"maximum": "50000", "settled": "0", "items": []},
        },
    ),
    Case(
        "completed-x402-v1",
        lambda: PaymentCompletedData((SettleResponseV1.from_wire(doc.receipt_v1()),)),
        lambda: {"status": "payment-completed", "receipts": [doc.receipt_v1()]},
        (Dialect.V02,),
    ),
    Case(
        "failed",
        lambda: PaymentFailedData(EC.SETTLEMENT_FAILED, (_v2(doc.failed_v2()),)),
        lambda: {"status": "payment-failed", "error": "SETTLEMENT_FAILED", "receipts": [doc.failed_v2()]},
    ),
    Case(
        "failed-in-verification",
        lambda: PaymentFailedData(EC.INVALID_SIGNATURE),
        lambda: {"status": "payment-failed", "error": "INVALID_SIGNATURE", "receipts": []},
    ),
    Case("rejected", PaymentRejectedData, lambda: {"status": "payment-rejected"}),
]
ROUND_TRIPS = [
    pytest.param(case, dialect, id=f"{case.name}-{dialect.value}")
    for case in CASES
    for dialect in case.dialects
]


def test_every_status_is_covered_in_both_dialects() -> None:
    covered = {(case.data().status, dialect) for case in CASES for dialect in case.dialects}
    assert len(covered) == 12


@pytest.mark.parametrize(("case", "dialect"), ROUND_TRIPS)
def test_encode_writes_the_exact_json(case: Case, dialect: Dialect) -> None:
    encoded = encode(case.data(), dialect)
    assert json.dumps(encoded) == json.dumps(_wire(case.members(), dialect))


@pytest.mark.parametrize(("case", "dialect"), ROUND_TRIPS)
def test_decode_reads_the_json_back(case: Case, dialect: Dialect) -> None:
    data = case.data()
    assert decode(_wire(case.members(), dialect), dialect) == data
    assert decode(json.loads(json.dumps(encode(data, dialect))), dialect) == data


@pytest.mark.parametrize(("case", "dialect"), ROUND_TRIPS)
def test_other_metadata_is_ignored(case: Case, dialect: Dialect) -> None:
    metadata = {
        "cartId": "cart-9",
        "https://example.com/ext/geo/v1": {"lat": 1.5},
        **encode(case.data(), dialect),
    }
    assert decode(metadata, dialect) == case.data()


def test_x402_version_is_written_as_an_integer() -> None:
    text = json.dumps(encode(CASES[0].data(), Dialect.V03))
    assert text.startswith(
        f'{{"{EXTENSION_URI}": {{"status": "payment-required", "required": {{"x402Version": 2, '
    )
    assert "2.0" not in text
    assert '"maxTimeoutSeconds": 60,' in text


def _through_protobuf(metadata: dict[str, Any]) -> Message:
    message: Message = ParseDict(
        {"messageId": "msg-1", "role": "ROLE_AGENT", "parts": [{"text": "Payment"}], "metadata": metadata},
        Message(),
    )
    return message


@pytest.mark.parametrize(("case", "dialect"), ROUND_TRIPS)
def test_protobuf_round_trip(case: Case, dialect: Dialect) -> None:
    data = case.data()
    message = _through_protobuf(encode(data, dialect))
    assert decode(MessageToDict(message)["metadata"], dialect) == data
    # protobuf registers Struct as a Mapping at run time; its stubs do not say so.
    assert decode(message.metadata, dialect) == data  # type: ignore[arg-type]


def test_protobuf_turns_versions_into_floats_and_decode_turns_them_back() -> None:
    data = PaymentSubmittedData(parse_payment_payload(doc.payload_v2()))
    after = MessageToDict(_through_protobuf(encode(data, Dialect.V03)))["metadata"]
    sent = after[EXTENSION_URI]["payload"]
    assert type(sent["x402Version"]) is float and sent["x402Version"] == 2.0
    assert type(sent["accepted"]["maxTimeoutSeconds"]) is float
    decoded = decode(after, Dialect.V03)
    assert decoded == data and decoded is not None
    assert '"x402Version": 2, ' in json.dumps(encode(decoded, Dialect.V03))


def test_pending_transaction() -> None:
    assert PaymentVerifiedData().pending_transaction is None
    pending = decode(
        _wire({"status": "payment-verified", "receipts": [doc.pending_v2()]}, Dialect.V03), Dialect.V03
    )
    assert isinstance(pending, PaymentVerifiedData)
    assert pending.pending_transaction == doc.TX_HASH


@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize(
    "metadata",
    [None, {}, {"cartId": "cart-9"}, {"https://example.com/ext/geo/v1": {"status": "payment-required"}}],
)
def test_no_extension_data_decodes_to_none(metadata: dict[str, Any] | None, dialect: Dialect) -> None:
    assert decode(metadata, dialect) is None


@pytest.mark.parametrize("dialect", list(Dialect))
def test_other_versions_uris_as_metadata_keys_are_not_extension_data(dialect: Dialect) -> None:
    # Neither dialect keys data by the v0.2 or v0.1 URI, so such entries belong to someone else.
    metadata = {EXTENSION_URI_V02: {"status": "payment-required"}, EXTENSION_URI_V01: {"status": 1}}
    assert decode(metadata, dialect) is None


# ----- encode and the message classes --------------------------------------------------------------


def test_encode_refuses_x402_v1_on_v03() -> None:
    data = PaymentSubmittedData(parse_payment_payload(doc.payload_v1()))
    assert encode(data, Dialect.V02)["x402.payment.payload"]["x402Version"] == 1  # type: ignore[index,call-overload]
    with pytest.raises(ExtensionMetadataError) as info:
        encode(data, Dialect.V03)
    assert info.value.code is MC.X402_VERSION_MISMATCH
    assert info.value.path == f"{ROOT}.payload"


def test_encode_refuses_a_v1_receipt_on_v03() -> None:
    data = PaymentCompletedData((SettleResponseV1.from_wire(doc.receipt_v1()),))
    with pytest.raises(ExtensionMetadataError) as info:
        encode(data, Dialect.V03)
    assert (info.value.code, info.value.path) == (MC.X402_VERSION_MISMATCH, f"{ROOT}.receipts[0]")


def test_encode_refuses_what_is_not_a_message() -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        encode({"status": "payment-rejected"}, Dialect.V03)  # type: ignore[arg-type]
    assert info.value.code is MC.INVALID_TYPE
    with pytest.raises(ExtensionMetadataError) as raw:
        encode(PaymentSubmittedData(doc.payload_v2()), Dialect.V03)  # type: ignore[arg-type]
    assert (raw.value.code, raw.value.path) == (MC.INVALID_TYPE, f"{ROOT}.payload")


@pytest.mark.parametrize(
    ("build", "path"),
    [
        (lambda: PaymentCompletedData(()), "receipts"),
        (lambda: PaymentCompletedData((_v2(doc.pending_v2()),)), "receipts"),
        (lambda: PaymentFailedData(EC.INVALID_AMOUNT, (_v2(doc.receipt_v2()),)), "receipts[0]"),
        (lambda: PaymentFailedData(EC.SETTLEMENT_FAILED, (_v2(doc.pending_v2()),)), "receipts[0]"),
        (lambda: PaymentVerifiedData((_v2(doc.failed_v2()),)), "receipts[0]"),
        (lambda: PaymentRequiredData(parse_payment_required(doc.required_v2()), EC.DUPLICATE_NONCE), "error"),
        (lambda: PaymentCompletedData((_v2(doc.settled_v2("1200")),), _usage()), "usage.settled"),
        (lambda: UsageItem("tokens", 3, 7, 20), "amount"),
        (lambda: PaymentUsage(1000, 1300, _usage().items), "settled"),
        (lambda: PaymentUsage(1000, 999, _usage().items), "settled"),
        (lambda: PaymentUsage(50_000, 1, ()), "settled"),
    ],
)
def test_message_classes_refuse_contradictions(build: Callable[[], object], path: str) -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        build()
    assert (info.value.code, info.value.path) == (MC.INCONSISTENT_CONTENT, path)


def test_usage_settles_what_was_used_capped_at_the_maximum() -> None:
    capped = PaymentUsage(1000, 1000, _usage().items)
    assert capped.to_wire()["settled"] == "1000"
    assert PaymentUsage(50_000, 0, (UsageItem("tokens", 0, 7, 0),)).settled == 0
    # Beyond 2**53 the numbers stay exact: they travel as decimal strings.
    big = UsageItem("wei", 2**200, 3, 3 * 2**200)
    usage = PaymentUsage(2**256 - 1, 3 * 2**200, (big,))
    completed = PaymentCompletedData((_v2(doc.receipt_v2()),), usage)
    for dialect in Dialect:
        assert decode(json.loads(json.dumps(encode(completed, dialect))), dialect) == completed


def test_message_classes_are_frozen_and_keep_receipts_as_tuples() -> None:
    receipts = [_v2(doc.receipt_v2())]
    data = PaymentCompletedData(receipts)  # type: ignore[arg-type]
    assert data.receipts == tuple(receipts)
    with pytest.raises(AttributeError):
        data.receipts = ()  # type: ignore[misc]


# ----- property: decode never fails with anything but ExtensionMetadataError -------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(
        ["payment-required", "EXPIRED_PAYMENT", "eip155:84532", "base", "settlement_pending", ""]
    )
)
_json = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=24,
)


def _mutate(document: Any, steps: list[int], replacement: Any) -> Any:
    """Replace one subtree of a valid document, chosen by ``steps``, with arbitrary JSON."""
    if not steps or not isinstance(document, dict | list) or not document:
        return replacement
    keys = list(document) if isinstance(document, dict) else list(range(len(document)))
    key = keys[steps[0] % len(keys)]
    document[key] = _mutate(document[key], steps[1:], replacement)
    return document


def _documents(*makers: Callable[[], dict[str, Any]]) -> st.SearchStrategy[Any]:
    """Valid documents, and documents with one subtree replaced (about a third each way)."""
    valid = st.sampled_from(makers).map(lambda make: make())
    mutated = st.builds(_mutate, valid, st.lists(st.integers(0, 50), min_size=1, max_size=6), _json)
    return valid | valid | mutated


_fields: dict[str, st.SearchStrategy[Any]] = {
    "required": _documents(doc.required_v2, doc.required_v1, doc.required_permit2),
    "payload": _documents(doc.payload_v2, doc.payload_v1, doc.permit2_payload),
    "receipts": st.lists(
        _documents(doc.receipt_v2, doc.pending_v2, doc.failed_v2, doc.receipt_v1), max_size=3
    ),
    "error": st.sampled_from([c.value for c in PaymentErrorCode]),
    "usage": _documents(doc.usage),
}
_statuses = st.sampled_from([s.value for s in PaymentStatus])


# The fields each status needs on the wire and those it may have.
_STATUS_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "payment-required": (("required",), ("error",)),
    "payment-submitted": (("payload",), ()),
    "payment-verified": ((), ("receipts",)),
    "payment-completed": (("receipts",), ("usage",)),
    "payment-failed": (("error", "receipts"), ()),
    "payment-rejected": ((), ()),
}


@st.composite
def _members(draw: st.DrawFn) -> dict[str, Any]:
    """An extension value that is often valid: a status with its fields, sometimes broken.

    Hypothesis favours small integers, so the common (valid-looking) branch is always 0.
    """
    status = draw(_statuses)
    required, optional = _STATUS_FIELDS[status]
    if draw(st.integers(0, 4)) != 4:
        names = [*required, *(name for name in optional if draw(st.booleans()))]
    else:
        names = [name for name in _fields if draw(st.booleans())]
    members: dict[str, Any] = {}
    if draw(st.integers(0, 19)) != 19:
        members["status"] = status if draw(st.integers(0, 19)) != 19 else draw(_json)
    for name in names:
        members[name] = draw(_fields[name]) if draw(st.integers(0, 9)) != 9 else draw(_json)
    if draw(st.integers(0, 19)) == 19:
        members[draw(st.text(max_size=8))] = draw(_json)
    return members


def _in_form(members: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    if dialect is Dialect.V03:
        return {EXTENSION_URI: members}
    return {f"x402.payment.{name}": value for name, value in members.items()}


@st.composite
def _metadata(draw: st.DrawFn) -> tuple[Any, Dialect]:
    """Metadata and the dialect it is read in: mostly in that dialect's form, sometimes not."""
    dialect = draw(st.sampled_from(list(Dialect)))
    choice = draw(st.integers(0, 19))
    if choice == 19:
        return draw(_json), dialect
    if choice == 18:
        return draw(st.dictionaries(st.text(max_size=20), _json, max_size=4)), dialect
    form = dialect if choice < 15 else draw(st.sampled_from(list(Dialect)))
    metadata = _in_form(draw(_members()), form)
    if choice == 17:
        other = Dialect.V02 if form is Dialect.V03 else Dialect.V03
        metadata.update(_in_form(draw(_members()), other))
    return metadata, dialect


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_metadata())
def test_decode_of_arbitrary_metadata_returns_or_raises_extension_metadata_error(
    case: tuple[Any, Dialect],
) -> None:
    metadata, dialect = case
    try:
        decoded = decode(metadata, dialect)
    except ExtensionMetadataError as exc:
        assert exc.code in set(MetadataErrorCode)
        return
    if decoded is not None:
        # Whatever decodes is a valid message: it encodes, and reads back as itself.
        assert decode(encode(decoded, dialect), dialect) == decoded


def test_dialect_given_as_its_string_value_is_not_mistaken_for_the_other() -> None:
    data = PaymentRejectedData()
    assert encode(data, "v0.3") == {EXTENSION_URI: {"status": "payment-rejected"}}  # type: ignore[arg-type]
    assert decode({EXTENSION_URI: {"status": "payment-rejected"}}, "v0.3") == data  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        decode({}, "1.0")  # type: ignore[arg-type]
