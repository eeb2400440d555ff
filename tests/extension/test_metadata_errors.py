"""Malformed extension metadata: each way a message breaks the wire forms, refused with its code and path."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_x402.extension import (
    EXTENSION_URI,
    MAX_STRING_CHARS,
    Dialect,
    ExtensionMetadataError,
    MetadataErrorCode,
    PaymentErrorCode,
    decode,
)

from . import documents as doc

ROOT = f"metadata[{EXTENSION_URI!r}]"
EC = PaymentErrorCode
MC = MetadataErrorCode


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
        _v03(status=REQUIRED, required=_with(doc.required_v2(), ("accepts", 0, "scheme"), "deferred")),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.required.accepts[0].scheme",
    ),
    (
        "other-scheme-in-payment",
        V03,
        _v03(status=SUBMITTED, payload=_with(doc.payload_v2(), ("accepted", "scheme"), "deferred")),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.payload.accepted.scheme",
    ),
    (
        "other-scheme-in-permit2-payment",
        V03,
        _v03(status=SUBMITTED, payload=_with(doc.permit2_payload(), ("accepted", "scheme"), "deferred")),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.payload.accepted.scheme",
    ),
    (
        "upto-paid-by-eip3009",
        V03,
        _v03(status=SUBMITTED, payload=_with(doc.payload_v2(), ("accepted", "scheme"), "upto")),
        MC.INVALID_X402_VALUE,
        f"{ROOT}.payload.payload",
    ),
    (
        "permit2-payment-in-x402-v1",
        V02,
        _v02(status=SUBMITTED, payload=_with(doc.permit2_payload(), ("x402Version",), 1)),
        MC.INVALID_X402_VALUE,
        None,
    ),
    (
        "permit2-payment-with-an-eip3009-authorization-inside",
        V03,
        _v03(
            status=SUBMITTED,
            payload=_with(doc.permit2_payload(), ("payload", "permit2Authorization"), doc.exact_payload()),
        ),
        MC.INVALID_X402_VALUE,
        None,
    ),
    (
        "usage-on-failed",
        V03,
        _v03(status="payment-failed", error="SETTLEMENT_FAILED", receipts=[], usage=doc.usage()),
        MC.UNEXPECTED_FIELD,
        f"{ROOT}.usage",
    ),
    (
        "usage-number-as-json-number",
        V02,
        _v02(
            status="payment-completed",
            receipts=[doc.receipt_v2()],
            usage=_with(doc.usage(), ("maximum",), 50000),
        ),
        MC.INVALID_TYPE,
        "metadata['x402.payment.usage'].maximum",
    ),
    (
        "usage-number-with-a-sign",
        V03,
        _v03(
            status="payment-completed",
            receipts=[doc.receipt_v2()],
            usage=_with(doc.usage(), ("settled",), "+1"),
        ),
        MC.INVALID_NUMBER,
        f"{ROOT}.usage.settled",
    ),
    (
        "usage-number-beyond-uint256",
        V03,
        _v03(
            status="payment-completed",
            receipts=[doc.receipt_v2()],
            usage=_with(doc.usage(), ("maximum",), str(2**256)),
        ),
        MC.INVALID_NUMBER,
        f"{ROOT}.usage.maximum",
    ),
    (
        "usage-item-amount-not-quantity-times-price",
        V03,
        _v03(
            status="payment-completed",
            receipts=[doc.receipt_v2()],
            usage=_with(doc.usage(), ("items", 1, "amount"), "101"),
        ),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.usage.items[1].amount",
    ),
    (
        "usage-settled-not-the-sum",
        V03,
        _v03(
            status="payment-completed",
            receipts=[doc.receipt_v2()],
            usage=_with(doc.usage(), ("settled",), "1299"),
        ),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.usage.settled",
    ),
    (
        "usage-settled-not-the-receipts-amount",
        V03,
        _v03(status="payment-completed", receipts=[doc.settled_v2("1200")], usage=doc.usage()),
        MC.INCONSISTENT_CONTENT,
        f"{ROOT}.usage.settled",
    ),
    (
        "usage-unknown-member",
        V03,
        _v03(status="payment-completed", receipts=[doc.receipt_v2()], usage={**doc.usage(), "tax": "1"}),
        MC.UNKNOWN_FIELD,
        f"{ROOT}.usage.tax",
    ),
    (
        "usage-item-missing-its-price",
        V02,
        _v02(
            status="payment-completed",
            receipts=[doc.receipt_v2()],
            usage=_with(doc.usage(), ("items", 0), {"name": "tokens", "quantity": "1", "amount": "1"}),
        ),
        MC.MISSING_FIELD,
        "metadata['x402.payment.usage'].items[0].unitPrice",
    ),
    (
        "usage-item-empty-name",
        V03,
        _v03(
            status="payment-completed",
            receipts=[doc.receipt_v2()],
            usage=_with(doc.usage(), ("items", 0, "name"), ""),
        ),
        MC.INVALID_TYPE,
        f"{ROOT}.usage.items[0].name",
    ),
    (
        "usage-too-many-items",
        V03,
        _v03(
            status="payment-completed",
            receipts=[doc.receipt_v2()],
            usage={
                "maximum": "1",
                "settled": "0",
                "items": [{"name": "n", "quantity": "0", "unitPrice": "0", "amount": "0"}] * 101,
            },
        ),
        MC.TOO_LARGE,
        f"{ROOT}.usage.items",
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
