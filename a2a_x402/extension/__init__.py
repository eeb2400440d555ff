"""The wire contract of the A2A x402 payment extension.

Pure data and parsing, no I/O; used by both the merchant and the payer. It defines the extension
URIs and the dialect each A2A version speaks (``negotiate_dialect``), the payment statuses and
error codes, the content of extension messages (a metered task's usage among it) and its two wire
forms (``encode``/``decode``),
the repair of numbers that went through a protobuf ``Struct``, the literal mapping table
between extension v0.2 on A2A 0.3 and v0.3 on A2A 1.0, and the AP2 data parts, hashes and price rule
of the embedded flow (§20).
"""

from __future__ import annotations

from ._ap2 import (
    AP2_CHECKOUT_ARTIFACT_ID,
    AP2_CHECKOUT_ARTIFACT_NAME,
    AP2_CHECKOUT_JWT_KEY,
    AP2_CHECKOUT_MANDATE_KEY,
    AP2_CHECKOUT_RECEIPT_KEY,
    AP2_PAYMENT_MANDATE_KEY,
    AP2_PAYMENT_RECEIPT_KEY,
    AP2_V01_CART_MANDATE_KEY,
    AP2_V01_PAYMENT_MANDATE_KEY,
    AP2_X402_METHOD,
    MAX_AP2_TOKEN_CHARS,
    Ap2Declaration,
    Ap2ErrorCode,
    Ap2Mandates,
    Ap2Merchant,
    Ap2PriceError,
    Ap2Receipts,
    ap2_digest,
    checkout_total_for_amount,
    minor_unit_exponent,
    parse_ap2_checkout_data,
    parse_ap2_declaration,
    parse_ap2_mandates,
    parse_ap2_receipts,
    payload_hash,
    token_amount_for_total,
)
from ._errors import ExtensionMetadataError, MetadataErrorCode
from ._literals import LITERAL_MAPPINGS, LiteralCategory, LiteralMapping, literal_map
from ._metadata import (
    FLAT_KEY_PREFIX,
    PaymentCompletedData,
    PaymentData,
    PaymentFailedData,
    PaymentRejectedData,
    PaymentRequiredData,
    PaymentSubmittedData,
    PaymentVerifiedData,
    decode,
    encode,
)
from ._numbers import MAX_DEPTH, MAX_NODES, MAX_STRING_CHARS, JsonValue, expect_int, normalize_struct_value
from ._states import (
    REASON_ERROR_CODES,
    RETRYABLE_ERROR_CODES,
    SETTLEMENT_PENDING_REASON,
    PaymentErrorCode,
    PaymentStatus,
    error_code_for_reason,
    reason_name,
)
from ._uris import EXTENSION_URI, EXTENSION_URI_V01, EXTENSION_URI_V02, Dialect, negotiate_dialect
from ._usage import MAX_USAGE_ITEMS, MAX_USAGE_NAME_CHARS, PaymentUsage, UsageItem
from ._x402 import X402PaymentPayload, X402PaymentRequired, X402Receipt

__all__ = [
    "AP2_CHECKOUT_ARTIFACT_ID",
    "AP2_CHECKOUT_ARTIFACT_NAME",
    "AP2_CHECKOUT_JWT_KEY",
    "AP2_CHECKOUT_MANDATE_KEY",
    "AP2_CHECKOUT_RECEIPT_KEY",
    "AP2_PAYMENT_MANDATE_KEY",
    "AP2_PAYMENT_RECEIPT_KEY",
    "AP2_V01_CART_MANDATE_KEY",
    "AP2_V01_PAYMENT_MANDATE_KEY",
    "AP2_X402_METHOD",
    "EXTENSION_URI",
    "EXTENSION_URI_V01",
    "EXTENSION_URI_V02",
    "FLAT_KEY_PREFIX",
    "LITERAL_MAPPINGS",
    "MAX_AP2_TOKEN_CHARS",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_STRING_CHARS",
    "MAX_USAGE_ITEMS",
    "MAX_USAGE_NAME_CHARS",
    "REASON_ERROR_CODES",
    "RETRYABLE_ERROR_CODES",
    "SETTLEMENT_PENDING_REASON",
    "Ap2Declaration",
    "Ap2ErrorCode",
    "Ap2Mandates",
    "Ap2Merchant",
    "Ap2PriceError",
    "Ap2Receipts",
    "Dialect",
    "ExtensionMetadataError",
    "JsonValue",
    "LiteralCategory",
    "LiteralMapping",
    "MetadataErrorCode",
    "PaymentCompletedData",
    "PaymentData",
    "PaymentErrorCode",
    "PaymentFailedData",
    "PaymentRejectedData",
    "PaymentRequiredData",
    "PaymentStatus",
    "PaymentSubmittedData",
    "PaymentUsage",
    "PaymentVerifiedData",
    "UsageItem",
    "X402PaymentPayload",
    "X402PaymentRequired",
    "X402Receipt",
    "ap2_digest",
    "checkout_total_for_amount",
    "decode",
    "encode",
    "error_code_for_reason",
    "expect_int",
    "literal_map",
    "minor_unit_exponent",
    "negotiate_dialect",
    "normalize_struct_value",
    "parse_ap2_checkout_data",
    "parse_ap2_declaration",
    "parse_ap2_mandates",
    "parse_ap2_receipts",
    "payload_hash",
    "reason_name",
    "token_amount_for_total",
]
