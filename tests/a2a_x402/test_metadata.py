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

from a2a_x402 import (
    EXTENSION_URI,
    EXTENSION_URI_V01,
    EXTENSION_URI_V02,
    MAX_STRING_CHARS,
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
    PaymentVerifiedData,
    decode,
    encode,
)
from facilitator.wire import SettleResponse, SettleResponseV1, parse_payment_payload, parse_payment_required

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


# ----- malformed metadata ------------------------------------------------------------------------------


def _v03(**members: Any) -> dict[str, Any]:
    return {EXTENSION_URI: members}


def _v02(**members: Any) -> dict[str, Any]:
    return {f"x402.payment.{name}": value for name, value in members.items()}


def _with(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    target: Any = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return document


def _without(document: dict[str, Any], key: str) -> dict[str, Any]:
    del document[key]
    return document


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


V03, V02 = Dialect.V03, Dialect.V02
REQUIRED, SUBMITTED = "payment-required", "payment-submitted"

MALFORMED: list[Any] = [
    # The metadata itself.
    ("metadata-not-an-object", V03, ["x402"], MC.INVALID_TYPE, "metadata"),
    ("uri-value-a-string", V03, {EXTENSION_URI: "payment-required"}, MC.INVALID_TYPE, ROOT),
    ("uri-value-null", V03, {EXTENSION_URI: None}, MC.INVALID_TYPE, ROOT),
    ("uri-value-an-array", V03, {EXTENSION_URI: [{"status": REQUIRED}]}, MC.INVALID_TYPE, ROOT),
    # Status.
    ("unknown-status", V03, _v03(status="payment-pending"), MC.UNKNOWN_STATUS, f"{ROOT}.status"),
    (
        "unknown-status-v02",
        V02,
        _v02(status="PAYMENT_REQUIRED"),
        MC.UNKNOWN_STATUS,
        "metadata['x402.payment.status']",
    ),
    ("status-not-a-string", V03, _v03(status=1), MC.INVALID_TYPE, f"{ROOT}.status"),
    ("status-missing", V03, _v03(required=doc.required_v2()), MC.MISSING_FIELD, f"{ROOT}.status"),
    (
        "status-missing-v02",
        V02,
        _v02(payload=doc.payload_v2()),
        MC.MISSING_FIELD,
        "metadata['x402.payment.status']",
    ),
    # Fields per status.
    ("payload-missing", V03, _v03(status=SUBMITTED), MC.MISSING_FIELD, f"{ROOT}.payload"),
    (
        "payload-missing-v02",
        V02,
        _v02(status=SUBMITTED),
        MC.MISSING_FIELD,
        "metadata['x402.payment.payload']",
    ),
    ("required-missing", V03, _v03(status=REQUIRED), MC.MISSING_FIELD, f"{ROOT}.required"),
    (
        "receipts-missing-completed",
        V03,
        _v03(status="payment-completed"),
        MC.MISSING_FIELD,
        f"{ROOT}.receipts",
    ),
    (
        "receipts-missing-failed",
        V02,
        _v02(status="payment-failed", error="INVALID_SIGNATURE"),
        MC.MISSING_FIELD,
        "metadata['x402.payment.receipts']",
    ),
    (
        "error-missing-failed",
        V03,
        _v03(status="payment-failed", receipts=[]),
        MC.MISSING_FIELD,
        f"{ROOT}.error",
    ),
    (
        "payload-with-required",
        V03,
        _v03(status=REQUIRED, required=doc.required_v2(), payload=doc.payload_v2()),
        MC.UNEXPECTED_FIELD,
        f"{ROOT}.payload",
    ),
    (
        "receipts-with-rejected",
        V02,
        _v02(status="payment-rejected", receipts=[]),
        MC.UNEXPECTED_FIELD,
        "metadata['x402.payment.receipts']",
    ),
    (
        "error-with-completed",
        V03,
        _v03(status="payment-completed", receipts=[doc.receipt_v2()], error="X"),
        MC.UNEXPECTED_FIELD,
        f"{ROOT}.error",
    ),
    (
        "unknown-field",
        V03,
        _v03(status="payment-rejected", reason="too expensive"),
        MC.UNKNOWN_FIELD,
        f"{ROOT}.reason",
    ),
    (
        "unknown-field-odd-name",
        V03,
        _v03(status="payment-rejected", **{"a b": 1}),
        MC.UNKNOWN_FIELD,
        f"{ROOT}['a b']",
    ),
    (
        "unknown-flat-key",
        V02,
        _v02(status="payment-rejected", requirements={}),
        MC.UNKNOWN_FIELD,
        "metadata['x402.payment.requirements']",
    ),
    # Shapes of the values.
    (
        "payload-a-string",
        V03,
        _v03(status=SUBMITTED, payload="eyJ4NDAy..."),
        MC.INVALID_TYPE,
        f"{ROOT}.payload",
    ),
    (
        "payload-an-array",
        V02,
        _v02(status=SUBMITTED, payload=[doc.payload_v2()]),
        MC.INVALID_TYPE,
        "metadata['x402.payment.payload']",
    ),
    ("required-null", V03, _v03(status=REQUIRED, required=None), MC.INVALID_TYPE, f"{ROOT}.required"),
    (
        "receipts-an-object",
        V03,
        _v03(status="payment-completed", receipts=doc.receipt_v2()),
        MC.INVALID_TYPE,
        f"{ROOT}.receipts",
    ),
    (
        "receipt-a-string",
        V03,
        _v03(status="payment-completed", receipts=["0xabc"]),
        MC.INVALID_TYPE,
        f"{ROOT}.receipts[0]",
    ),
    (
        "error-not-a-string",
        V03,
        _v03(status="payment-failed", error=3, receipts=[]),
        MC.INVALID_TYPE,
        f"{ROOT}.error",
    ),
    (
        "error-unknown",
        V03,
        _v03(status="payment-failed", error="insufficient_funds", receipts=[]),
        MC.UNKNOWN_ERROR_CODE,
        f"{ROOT}.error",
    ),
    # x402 versions.
    (
        "x402-v1-required-on-v03",
        V03,
        _v03(status=REQUIRED, required=doc.required_v1()),
        MC.X402_VERSION_MISMATCH,
        f"{ROOT}.required.x402Version",
    ),
    (
        "x402-v1-payload-on-v03",
        V03,
        _v03(status=SUBMITTED, payload=doc.payload_v1()),
        MC.X402_VERSION_MISMATCH,
        f"{ROOT}.payload.x402Version",
    ),
    (
        "x402-v1-receipt-on-v03",
        V03,
        _v03(status="payment-completed", receipts=[doc.receipt_v1()]),
        MC.X402_VERSION_MISMATCH,
        f"{ROOT}.receipts[0].network",
    ),
    (
        "x402-v3-on-v02",
        V02,
        _v02(status=SUBMITTED, payload=_with(doc.payload_v2(), ("x402Version",), 3)),
        MC.X402_VERSION_MISMATCH,
        "metadata['x402.payment.payload'].x402Version",
    ),
    (
        "x402-version-fraction",
        V03,
        _v03(status=SUBMITTED, payload=_with(doc.payload_v2(), ("x402Version",), 2.5)),
        MC.INVALID_NUMBER,
        f"{ROOT}.payload.x402Version",
    ),
    (
        "x402-version-a-string",
        V03,
        _v03(status=SUBMITTED, payload=_with(doc.payload_v2(), ("x402Version",), "2")),
        MC.INVALID_TYPE,
        f"{ROOT}.payload.x402Version",
    ),
    (
        "x402-version-a-boolean",
        V02,
        _v02(status=SUBMITTED, payload=_with(doc.payload_v1(), ("x402Version",), True)),
        MC.INVALID_TYPE,
        "metadata['x402.payment.payload'].x402Version",
    ),
    (
        "x402-version-missing",
        V03,
        _v03(status=SUBMITTED, payload=_without(doc.payload_v2(), "x402Version")),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.payload.x402Version",
    ),
    # x402 values that fail the wire types.
    (
        "amount-a-number",
        V03,
        _v03(status=REQUIRED, required=_with(doc.required_v2(), ("accepts", 0, "amount"), 10000)),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.required.accepts[0].amount",
    ),
    (
        "timeout-a-fraction",
        V03,
        _v03(status=REQUIRED, required=_with(doc.required_v2(), ("accepts", 0, "maxTimeoutSeconds"), 60.5)),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.required.accepts[0].maxTimeoutSeconds",
    ),
    (
        "no-accepts",
        V02,
        _v02(status=REQUIRED, required=_with(doc.required_v1(), ("accepts",), [])),
        MC.INVALID_X402_VALUE,
        "metadata['x402.payment.required'].accepts",
    ),
    (
        "signature-garbage",
        V03,
        _v03(status=SUBMITTED, payload=_with(doc.payload_v2(), ("payload", "signature"), "not hex")),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.payload.payload.signature",
    ),
    (
        "receipt-success-without-transaction",
        V03,
        _v03(status="payment-completed", receipts=[doc.receipt_v2(tx="")]),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.receipts[0].transaction",
    ),
    # Content that contradicts the status.
    (
        "required-with-terminal-error",
        V03,
        _v03(status=REQUIRED, required=doc.required_v2(), error="INVALID_AMOUNT"),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.error",
    ),
    (
        "completed-without-receipts",
        V03,
        _v03(status="payment-completed", receipts=[]),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.receipts",
    ),
    (
        "completed-newest-failed",
        V02,
        _v02(status="payment-completed", receipts=[doc.receipt_v2(), doc.failed_v2()]),
        MC.INCONSISTENT_CONTENT,
        # The success is reported where it stands: nothing may follow a successful settlement.
        "metadata['x402.payment.receipts'][0]",
    ),
    (
        "failed-with-success",
        V03,
        _v03(status="payment-failed", error="INVALID_AMOUNT", receipts=[doc.receipt_v2()]),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.receipts[0]",
    ),
    (
        "failed-while-pending",
        V03,
        _v03(
            status="payment-failed", error="SETTLEMENT_FAILED", receipts=[doc.failed_v2(), doc.pending_v2()]
        ),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.receipts[1]",
    ),
    (
        "verified-empty-receipts",
        V03,
        _v03(status="payment-verified", receipts=[]),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.receipts",
    ),
    (
        "verified-newest-not-pending",
        V02,
        _v02(status="payment-verified", receipts=[doc.failed_v2()]),
        MC.INCONSISTENT_CONTENT,
        "metadata['x402.payment.receipts'][0]",
    ),
    (
        "verified-with-success",
        V03,
        _v03(status="payment-verified", receipts=[doc.receipt_v2(), doc.pending_v2()]),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.receipts[0]",
    ),
    (
        "pending-without-transaction",
        V03,
        _v03(status="payment-verified", receipts=[doc.pending_v2(tx="")]),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.receipts[0]",
    ),
    # The other dialect's form.
    (
        "flat-keys-on-v03",
        V03,
        _v02(status=REQUIRED, required=doc.required_v2()),
        MC.DIALECT_MISMATCH,
        "metadata['x402.payment.status']",
    ),
    (
        "both-forms-on-v03",
        V03,
        {**_v03(status="payment-rejected"), **_v02(status="payment-rejected")},
        MC.DIALECT_MISMATCH,
        "metadata['x402.payment.status']",
    ),
    (
        "stray-flat-key-on-v03",
        V03,
        {**_v03(status="payment-rejected"), "x402.payment.original_prompt": "hi"},
        MC.DIALECT_MISMATCH,
        "metadata['x402.payment.original_prompt']",
    ),
    ("uri-object-on-v02", V02, _v03(status=REQUIRED, required=doc.required_v2()), MC.DIALECT_MISMATCH, ROOT),
    (
        "both-forms-on-v02",
        V02,
        {**_v02(status="payment-rejected"), **_v03(status="payment-rejected")},
        MC.DIALECT_MISMATCH,
        ROOT,
    ),
    # Numbers and sizes.
    (
        "nan",
        V03,
        _v03(status=REQUIRED, required=_with(doc.required_v2(), ("accepts", 0, "extra", "n"), float("nan"))),
        MC.INVALID_NUMBER,
        f"{ROOT}.required.accepts[0].extra.n",
    ),
    (
        "huge-float",
        V03,
        _v03(status=SUBMITTED, payload=_with(doc.payload_v2(), ("x402Version",), 2.0**64)),
        MC.INVALID_NUMBER,
        f"{ROOT}.payload.x402Version",
    ),
    (
        "huge-string",
        V03,
        _v03(status=REQUIRED, required=_with(doc.required_v2(), ("error",), "x" * MAX_STRING_CHARS)),
        MC.TOO_LARGE,
        f"{ROOT}.required.error",
    ),
    (
        "many-receipts",
        V02,
        _v02(status="payment-completed", receipts=[doc.receipt_v2()] * 2000),
        MC.TOO_LARGE,
        None,
    ),
    (
        "deep-nesting",
        V03,
        _v03(status=REQUIRED, required=_with(doc.required_v2(), ("accepts", 0, "extra", "n"), _nested(40))),
        MC.TOO_LARGE,
        None,
    ),
    (
        "deep-nesting-far-beyond-the-recursion-limit",
        V02,
        _v02(status=SUBMITTED, payload=_with(doc.payload_v2(), ("accepted",), _nested(50_000))),
        MC.TOO_LARGE,
        None,
    ),
    (
        "other-scheme-in-terms",
        V03,
        _v03(status=REQUIRED, required=_with(doc.required_v2(), ("accepts", 0, "scheme"), "upto")),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.required.accepts[0].scheme",
    ),
    (
        "other-scheme-in-payment",
        V03,
        _v03(status=SUBMITTED, payload=_with(doc.payload_v2(), ("accepted", "scheme"), "upto")),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.payload.accepted.scheme",
    ),
    ("binary", V03, _v03(status=SUBMITTED, payload=b"\x00\x01"), MC.INVALID_TYPE, f"{ROOT}.payload"),
    ("non-string-key", V03, {EXTENSION_URI: {"status": "payment-rejected", 1: 2}}, MC.INVALID_TYPE, ROOT),
]


@pytest.mark.parametrize(
    ("metadata", "dialect", "code", "path"),
    [pytest.param(m, d, c, p, id=name) for name, d, m, c, p in MALFORMED],
)
def test_malformed_metadata_raises_extension_metadata_error(
    metadata: Any, dialect: Dialect, code: MetadataErrorCode, path: str | None
) -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        decode(metadata, dialect)
    assert info.value.code is code, info.value
    if path is not None:
        assert info.value.path == path
    assert str(info.value).startswith(info.value.path)
    assert isinstance(info.value, ValueError)


def test_error_messages_do_not_quote_untrusted_values() -> None:
    secret = "payment-pending-" + "z" * 100
    with pytest.raises(ExtensionMetadataError) as info:
        decode(_v03(status=secret), Dialect.V03)
    assert secret not in str(info.value)
    assert "payment-required" in str(info.value)  # the message names what is expected


def test_error_repr_and_message() -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        decode(_v02(status=SUBMITTED), Dialect.V02)
    assert str(info.value) == "metadata['x402.payment.payload']: required with status payment-submitted"
    assert repr(info.value) == (
        "ExtensionMetadataError(code='missing_field', path=\"metadata['x402.payment.payload']\", "
        "detail='required with status payment-submitted')"
    )


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
    ],
)
def test_message_classes_refuse_contradictions(build: Callable[[], PaymentData], path: str) -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        build()
    assert (info.value.code, info.value.path) == (MC.INCONSISTENT_CONTENT, path)


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
    "required": _documents(doc.required_v2, doc.required_v1),
    "payload": _documents(doc.payload_v2, doc.payload_v1),
    "receipts": st.lists(
        _documents(doc.receipt_v2, doc.pending_v2, doc.failed_v2, doc.receipt_v1), max_size=3
    ),
    "error": st.sampled_from([c.value for c in PaymentErrorCode]),
}
_statuses = st.sampled_from([s.value for s in PaymentStatus])


# The fields each status needs on the wire and those it may have.
_STATUS_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "payment-required": (("required",), ("error",)),
    "payment-submitted": (("payload",), ()),
    "payment-verified": ((), ("receipts",)),
    "payment-completed": (("receipts",), ()),
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
