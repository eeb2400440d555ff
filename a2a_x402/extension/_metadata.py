"""Extension messages: their logical content and its two wire forms.

The content of an extension message is one of six frozen dataclasses, one per payment status,
each holding exactly the fields that status allows. ``encode`` writes it in a dialect's wire form
and ``decode`` reads it back, strictly:

==================  ======================  ========================================
status              required fields         optional fields
==================  ======================  ========================================
payment-required    required                error (a retryable code: fresh terms)
payment-submitted   payload                 -
payment-verified    -                       receipts (only to report a pending settlement)
payment-completed   receipts (≥ 1)          usage (a metered task's, see `_usage`)
payment-failed      error, receipts (≥ 0)   -
payment-rejected    -                       -
==================  ======================  ========================================

Wire forms (``Dialect.V03`` on A2A 1.0, ``Dialect.V02`` on A2A 0.3)::

    V03  {"<EXTENSION_URI>": {"status": "payment-failed", "error": "...", "receipts": [...]}}
    V02  {"x402.payment.status": "payment-failed", "x402.payment.error": "...",
          "x402.payment.receipts": [...]}

Receipts are the cumulative history of settlement attempts, newest last. Settlement pending
(the transaction was broadcast, its outcome is not known yet) is reported as ``payment-verified``
whose newest receipt is the facilitator's own pending answer, which names the transaction::

    {"status": "payment-verified",
     "receipts": [{"success": false, "errorReason": "settlement_pending",
                   "transaction": "0x<64 hex>", "network": "eip155:8453"}]}

so a payer learns the hash to watch, and a later ``payment-completed`` or ``payment-failed``
resolves it. On A2A 1.0 the embedded flow (spec §20: AP2 mandates in data parts) leaves the extension
object as it is, so it decodes as above. Its v0.2 form (§20.7: AP2 v0.1 objects in data parts, no
``required``/``payload`` in metadata) is not decoded here (such metadata fails with ``missing_field``):
the merchant reads the payment from the ``PaymentMandate`` part and decodes it as a ``payload``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields

from ._errors import ExtensionMetadataError, MetadataErrorCode, child_path
from ._numbers import JsonValue, json_type_name, normalize_members
from ._payment_data import (
    DATA_TYPES,
    PaymentCompletedData,
    PaymentData,
    PaymentFailedData,
    PaymentRejectedData,
    PaymentRequiredData,
    PaymentSubmittedData,
    PaymentVerifiedData,
)
from ._states import PaymentErrorCode, PaymentStatus
from ._uris import EXTENSION_URI, Dialect
from ._usage import PaymentUsage, parse_usage
from ._x402 import (
    X402PaymentPayload,
    X402PaymentRequired,
    X402Receipt,
    parse_payload,
    parse_receipt,
    parse_required,
    to_wire,
)

__all__ = [
    "FLAT_KEY_PREFIX",
    "PaymentCompletedData",
    "PaymentData",
    "PaymentFailedData",
    "PaymentRejectedData",
    "PaymentRequiredData",
    "PaymentSubmittedData",
    "PaymentVerifiedData",
    "decode",
    "encode",
]

FLAT_KEY_PREFIX = "x402.payment."
"""The prefix of the v0.2 metadata keys: ``x402.payment.<field>``."""

# Wire order of the fields after "status"; also the order errors are looked for in.
_FIELD_NAMES = ("required", "payload", "error", "receipts", "usage")
_RELATIVE_PATH = re.compile(r"([a-z]+)(.*)", re.DOTALL)


# Per status: the fields that must be on the wire, and those that may be.
_WIRE_FIELDS: Mapping[PaymentStatus, tuple[frozenset[str], frozenset[str]]] = {
    PaymentStatus.PAYMENT_REQUIRED: (frozenset({"required"}), frozenset({"error"})),
    PaymentStatus.PAYMENT_SUBMITTED: (frozenset({"payload"}), frozenset()),
    PaymentStatus.PAYMENT_VERIFIED: (frozenset(), frozenset({"receipts"})),
    PaymentStatus.PAYMENT_COMPLETED: (frozenset({"receipts"}), frozenset({"usage"})),
    PaymentStatus.PAYMENT_FAILED: (frozenset({"error", "receipts"}), frozenset()),
    PaymentStatus.PAYMENT_REJECTED: (frozenset(), frozenset()),
}


def encode(data: PaymentData, dialect: Dialect) -> dict[str, JsonValue]:
    """Write an extension message in the wire form of ``dialect``.

    The result holds only the extension's entries; merge it into the message's ``metadata`` (and
    list ``dialect.uri`` in ``Message.extensions``). Optional fields that are empty are left out;
    ``payment-failed`` always carries ``receipts``, empty or not.

    Args:
        data: the content to write.
        dialect: ``Dialect.V03`` gives ``{EXTENSION_URI: {"status": ..., ...}}``,
            ``Dialect.V02`` gives flat ``x402.payment.*`` keys.

    Returns:
        Plain JSON (str keys, ints, no floats from us), ready for ``json.dumps`` or ``ParseDict``.

    Raises:
        ExtensionMetadataError: ``x402_version_mismatch`` when an x402 v1 value is written on
            ``Dialect.V03``; ``invalid_type`` when ``data`` is not one of the message classes.
    """
    # A plain string would otherwise be taken for V02 by the identity checks below.
    dialect = Dialect(dialect)
    if not isinstance(data, tuple(DATA_TYPES.values())):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an extension message, got {type(data).__name__}"
        )
    required, _ = _WIRE_FIELDS[data.status]
    members: dict[str, JsonValue] = {"status": data.status.value}
    for field in fields(data):
        value = getattr(data, field.name)
        if field.name in required or value not in (None, ()):
            members[field.name] = _encode_field(value, dialect, _wire_path(dialect, field.name))
    if dialect is Dialect.V03:
        return {EXTENSION_URI: members}
    return {FLAT_KEY_PREFIX + name: value for name, value in members.items()}


def decode(metadata: Mapping[str, object] | None, dialect: Dialect) -> PaymentData | None:
    """Read the extension message in a message's ``metadata``, strictly, in the wire form of ``dialect``.

    Args:
        metadata: the message's metadata as decoded JSON or as the protobuf ``Struct`` itself;
            numbers that became floats in a ``Struct`` are read back as integers.
        dialect: the dialect negotiated for the request (see ``negotiate_dialect``).

    Returns:
        The message content, or ``None`` when the metadata holds no extension data.

    Raises:
        ExtensionMetadataError: for anything that is not exactly one valid extension message in
            ``dialect``'s form, including data in the other dialect's form (``dialect_mismatch``).
            The error's path names the offending field.
    """
    dialect = Dialect(dialect)
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an object, got {type(metadata).__name__}", "metadata"
        )
    raw = _extract_v03(metadata) if dialect is Dialect.V03 else _extract_v02(metadata)
    if raw is None:
        return None
    members = normalize_members(raw, lambda name: _wire_path(dialect, name))
    status = _read_status(members, dialect)
    allowed_required, allowed_optional = _WIRE_FIELDS[status]
    for name in _FIELD_NAMES:
        if name in members and name not in allowed_required | allowed_optional:
            raise ExtensionMetadataError(
                MetadataErrorCode.UNEXPECTED_FIELD,
                f"not allowed with status {status.value}",
                _wire_path(dialect, name),
            )
        if name in allowed_required and name not in members:
            raise ExtensionMetadataError(
                MetadataErrorCode.MISSING_FIELD,
                f"required with status {status.value}",
                _wire_path(dialect, name),
            )
    try:
        return _build(status, _Fields(members, dialect))
    except ExtensionMetadataError as exc:
        if exc.path.startswith("metadata"):
            raise
        # Parse errors carry their full path already; a message class's own checks know only the
        # field's name (``receipts[2]``), so complete it.
        raise ExtensionMetadataError(exc.code, exc.detail, _wire_path(dialect, exc.path)) from None


def _extract_v03(metadata: Mapping[str, object]) -> Mapping[str, object] | None:
    for key in metadata:
        if isinstance(key, str) and key.startswith(FLAT_KEY_PREFIX):
            raise ExtensionMetadataError(
                MetadataErrorCode.DIALECT_MISMATCH,
                f"v0.2 flat keys on an A2A 1.0 interface: extension v0.3 keeps all its data in "
                f"metadata[{EXTENSION_URI!r}]",
                child_path("metadata", key),
            )
    if EXTENSION_URI not in metadata:
        return None
    value = metadata[EXTENSION_URI]
    path = _wire_path(Dialect.V03, "")
    if not isinstance(value, Mapping):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an object, got {json_type_name(value)}", path
        )
    for key in value:
        if not isinstance(key, str):
            raise ExtensionMetadataError(MetadataErrorCode.INVALID_TYPE, "object keys must be strings", path)
        if key != "status" and key not in _FIELD_NAMES:
            raise ExtensionMetadataError(
                MetadataErrorCode.UNKNOWN_FIELD, "not a field of extension v0.3", child_path(path, key)
            )
    return value


def _extract_v02(metadata: Mapping[str, object]) -> Mapping[str, object] | None:
    if EXTENSION_URI in metadata:
        raise ExtensionMetadataError(
            MetadataErrorCode.DIALECT_MISMATCH,
            "the v0.3 extension object on an A2A 0.3 interface: extension v0.2 uses flat x402.payment.* keys",
            child_path("metadata", EXTENSION_URI),
        )
    members: dict[str, object] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key.startswith(FLAT_KEY_PREFIX):
            continue
        name = key.removeprefix(FLAT_KEY_PREFIX)
        if name != "status" and name not in _FIELD_NAMES:
            raise ExtensionMetadataError(
                MetadataErrorCode.UNKNOWN_FIELD, "not a key of extension v0.2", child_path("metadata", key)
            )
        members[name] = value
    return members or None


def _read_status(members: Mapping[str, JsonValue], dialect: Dialect) -> PaymentStatus:
    path = _wire_path(dialect, "status")
    if "status" not in members:
        raise ExtensionMetadataError(
            MetadataErrorCode.MISSING_FIELD, "every extension message has a status", path
        )
    value = members["status"]
    if not isinstance(value, str):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected a string, got {json_type_name(value)}", path
        )
    try:
        return PaymentStatus(value)
    except ValueError:
        # The value is not quoted: it is untrusted and may be long.
        expected = ", ".join(s.value for s in PaymentStatus)
        raise ExtensionMetadataError(
            MetadataErrorCode.UNKNOWN_STATUS, f"unknown payment status (expected one of {expected})", path
        ) from None


def _build(status: PaymentStatus, reader: _Fields) -> PaymentData:
    match status:
        case PaymentStatus.PAYMENT_REQUIRED:
            return PaymentRequiredData(reader.required(), reader.error() if "error" in reader else None)
        case PaymentStatus.PAYMENT_SUBMITTED:
            return PaymentSubmittedData(reader.payload())
        case PaymentStatus.PAYMENT_VERIFIED:
            return PaymentVerifiedData(reader.pending_receipts() if "receipts" in reader else ())
        case PaymentStatus.PAYMENT_COMPLETED:
            return PaymentCompletedData(reader.receipts(), reader.usage() if "usage" in reader else None)
        case PaymentStatus.PAYMENT_FAILED:
            return PaymentFailedData(reader.error(), reader.receipts())
        case PaymentStatus.PAYMENT_REJECTED:
            return PaymentRejectedData()


class _Fields:
    """Typed readers of the normalised fields of one extension value."""

    def __init__(self, members: Mapping[str, JsonValue], dialect: Dialect) -> None:
        self._members = members
        self._dialect = dialect

    def __contains__(self, name: str) -> bool:
        return name in self._members

    def required(self) -> X402PaymentRequired:
        return parse_required(self._members["required"], self._dialect, self._path("required"))

    def payload(self) -> X402PaymentPayload:
        return parse_payload(self._members["payload"], self._dialect, self._path("payload"))

    def receipts(self) -> tuple[X402Receipt, ...]:
        value, path = self._members["receipts"], self._path("receipts")
        if not isinstance(value, list):
            raise ExtensionMetadataError(
                MetadataErrorCode.INVALID_TYPE, f"expected an array, got {json_type_name(value)}", path
            )
        return tuple(parse_receipt(item, self._dialect, child_path(path, i)) for i, item in enumerate(value))

    def usage(self) -> PaymentUsage:
        return parse_usage(self._members["usage"], self._path("usage"))

    def pending_receipts(self) -> tuple[X402Receipt, ...]:
        receipts = self.receipts()
        if not receipts:
            # Only a pending settlement puts receipts on payment-verified; an empty list is a
            # second spelling of "no receipts", and every message has one wire form.
            raise ExtensionMetadataError(
                MetadataErrorCode.INCONSISTENT_CONTENT,
                "must not be empty on payment-verified; leave it out when no settlement is pending",
                self._path("receipts"),
            )
        return receipts

    def error(self) -> PaymentErrorCode:
        value, path = self._members["error"], self._path("error")
        if not isinstance(value, str):
            raise ExtensionMetadataError(
                MetadataErrorCode.INVALID_TYPE, f"expected a string, got {json_type_name(value)}", path
            )
        try:
            return PaymentErrorCode(value)
        except ValueError:
            expected = ", ".join(c.value for c in PaymentErrorCode)
            raise ExtensionMetadataError(
                MetadataErrorCode.UNKNOWN_ERROR_CODE,
                f"unknown payment error code (expected one of {expected})",
                path,
            ) from None

    def _path(self, name: str) -> str:
        return _wire_path(self._dialect, name)


def _encode_field(value: object, dialect: Dialect, path: str) -> JsonValue:
    if isinstance(value, PaymentErrorCode):
        return value.value
    if isinstance(value, PaymentUsage):
        return value.to_wire()
    if isinstance(value, tuple):
        return [to_wire(item, dialect, child_path(path, index)) for index, item in enumerate(value)]
    return to_wire(value, dialect, path)


def _wire_path(dialect: Dialect, relative: str) -> str:
    """Turn a path relative to the extension value (``receipts[1]``) into its path in ``metadata``."""
    if dialect is Dialect.V03:
        root = child_path("metadata", EXTENSION_URI)
        match = _RELATIVE_PATH.fullmatch(relative)
        return root if match is None else child_path(root, match.group(1)) + match.group(2)
    match = _RELATIVE_PATH.fullmatch(relative)
    if match is None:
        return "metadata"
    return child_path("metadata", FLAT_KEY_PREFIX + match.group(1)) + match.group(2)
