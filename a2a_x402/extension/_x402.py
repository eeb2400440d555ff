"""The boundary to the x402 wire types: which x402 versions each dialect carries, and parsing.

Extension v0.3 (A2A 1.0) carries x402 v2 only; v0.2 (A2A 0.3) carries v1 or v2. The x402
documents themselves are parsed by ``facilitator.wire``; this module picks the version, keeps its
``WireError`` from escaping (it becomes ``ExtensionMetadataError`` with the full metadata path),
and writes models back to their wire form.

A settlement receipt carries no ``x402Version``; its network tells: CAIP-2 (``eip155:8453``,
always with a colon) is v2, a legacy name (``base``, never with a colon) is v1.

Extension v0.3 profiles x402 to the ``exact`` scheme (its specification, §1.1 and §6.1): terms or a
payment naming any other scheme are refused, as its JSON Schema refuses them. v0.2 leaves the scheme
to x402.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias, TypeVar

from a2a_x402.facilitator.wire import (
    ExactPermit2PaymentPayload,
    PaymentPayload,
    PaymentPayloadV1,
    PaymentRequired,
    PaymentRequiredV1,
    SettleResponse,
    SettleResponseV1,
    UptoPaymentPayload,
    WireError,
    WireModel,
    parse_payment_payload,
    parse_payment_required,
    parse_permit2_payment_payload,
)

from ._errors import ExtensionMetadataError, MetadataErrorCode, child_path
from ._numbers import JsonValue, expect_int, json_type_name
from ._uris import Dialect

__all__ = ["X402PaymentPayload", "X402PaymentRequired", "X402Receipt"]

X402PaymentRequired: TypeAlias = PaymentRequired | PaymentRequiredV1
"""The payment terms: x402 v2 ``PaymentRequired``, or v1 on extension v0.2."""
X402PaymentPayload: TypeAlias = (
    PaymentPayload | ExactPermit2PaymentPayload | UptoPaymentPayload | PaymentPayloadV1
)
"""The signed payment: x402 v2 (an EIP-3009 ``PaymentPayload``, or a Permit2 ``ExactPermit2PaymentPayload``
or ``UptoPaymentPayload``), or v1 (EIP-3009) on extension v0.2."""
X402Receipt: TypeAlias = SettleResponse | SettleResponseV1
"""A settlement receipt: x402 v2 ``SettleResponse``, or v1 on extension v0.2."""

_VERSIONS: Mapping[Dialect, frozenset[int]] = {Dialect.V03: frozenset({2}), Dialect.V02: frozenset({1, 2})}
_V03_SCHEMES = frozenset({"exact", "upto"})
_V2_TYPES: tuple[type[WireModel], ...] = (
    PaymentRequired,
    PaymentPayload,
    ExactPermit2PaymentPayload,
    UptoPaymentPayload,
    SettleResponse,
)
_Model = TypeVar("_Model", bound=WireModel)


def parse_required(value: JsonValue, dialect: Dialect, path: str) -> X402PaymentRequired:
    """Parse the payment terms carried by ``dialect``; ``value`` is already normalised."""
    _check_version(value, dialect, path)
    required = _parse(parse_payment_required, value, path)
    if isinstance(required, PaymentRequired) and dialect is Dialect.V03:
        for index, requirements in enumerate(required.accepts):
            _check_scheme(requirements.scheme, child_path(child_path(path, "accepts"), index))
    return required


def parse_payload(value: JsonValue, dialect: Dialect, path: str) -> X402PaymentPayload:
    """Parse the signed payment carried by ``dialect``; ``value`` is already normalised."""
    if _check_version(value, dialect, path) == 2 and _carries_permit2(value):
        if dialect is Dialect.V03:
            # The profile's word before the document's, whose own check says less ("must be exact").
            _check_scheme(_scheme_of(value), child_path(path, "accepted"))
        return _parse(parse_permit2_payment_payload, value, path)
    payload = _parse(parse_payment_payload, value, path)
    if isinstance(payload, PaymentPayload) and dialect is Dialect.V03:
        _check_scheme(payload.accepted.scheme, child_path(path, "accepted"))
        if payload.accepted.scheme == "upto":
            raise ExtensionMetadataError(
                MetadataErrorCode.INVALID_X402_VALUE,
                "an upto payment carries a Permit2 authorization (permit2Authorization)",
                child_path(path, "payload"),
            )
    return payload


def parse_receipt(value: JsonValue, dialect: Dialect, path: str) -> X402Receipt:
    """Parse one settlement receipt carried by ``dialect``; ``value`` is already normalised."""
    if not isinstance(value, dict):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an object, got {json_type_name(value)}", path
        )
    network = value.get("network")
    legacy = isinstance(network, str) and ":" not in network
    if legacy and dialect is Dialect.V03:
        raise ExtensionMetadataError(
            MetadataErrorCode.X402_VERSION_MISMATCH,
            "an x402 v1 receipt (legacy network name) cannot be carried by extension v0.3; expected CAIP-2",
            child_path(path, "network"),
        )
    if legacy:
        return _parse(SettleResponseV1.from_wire, value, path)
    return _parse(SettleResponse.from_wire, value, path)


def to_wire(model: object, dialect: Dialect, path: str) -> dict[str, JsonValue]:
    """Return the wire form of an x402 model after checking ``dialect`` may carry its version.

    Raises:
        ExtensionMetadataError: ``x402_version_mismatch`` for an x402 v1 model on extension v0.3,
            ``invalid_type`` for anything that is not an x402 wire model.
    """
    if not isinstance(model, WireModel):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an x402 wire model, got {type(model).__name__}", path
        )
    if dialect is Dialect.V03 and not isinstance(model, _V2_TYPES):
        raise ExtensionMetadataError(
            MetadataErrorCode.X402_VERSION_MISMATCH,
            f"{type(model).__name__} is x402 v1; extension v0.3 carries x402 v2 only",
            path,
        )
    return model.to_json_dict()


def _check_scheme(scheme: str, path: str) -> None:
    if scheme not in _V03_SCHEMES:
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_X402_VALUE,
            "this scheme is not carried by extension v0.3 (expected exact or upto)",
            child_path(path, "scheme"),
        )


def _carries_permit2(value: JsonValue) -> bool:
    """Whether a v2 payment's ``payload`` holds a Permit2 authorization rather than an EIP-3009 one."""
    inner = value.get("payload") if isinstance(value, dict) else None
    return isinstance(inner, dict) and "permit2Authorization" in inner


def _scheme_of(value: JsonValue) -> str:
    accepted = value.get("accepted") if isinstance(value, dict) else None
    scheme = accepted.get("scheme") if isinstance(accepted, dict) else None
    # Not a string: the document's own parse says what is wrong with it.
    return scheme if isinstance(scheme, str) else "exact"


def _check_version(value: JsonValue, dialect: Dialect, path: str) -> int:
    if not isinstance(value, dict):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an object, got {json_type_name(value)}", path
        )
    if "x402Version" not in value:
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_X402_VALUE, "required field is missing", child_path(path, "x402Version")
        )
    found = expect_int(value["x402Version"], child_path(path, "x402Version"))
    allowed = _VERSIONS[dialect]
    if found not in allowed:
        shown = str(found) if -1000 < found < 1000 else "out of range"
        expected = " or ".join(str(v) for v in sorted(allowed))
        raise ExtensionMetadataError(
            MetadataErrorCode.X402_VERSION_MISMATCH,
            f"x402Version {shown} is not carried by extension {dialect.value} (expected {expected})",
            child_path(path, "x402Version"),
        )
    return found


def _parse(parser: Callable[[object], _Model], value: JsonValue, path: str) -> _Model:
    try:
        return parser(value)
    except WireError as exc:
        where = path if not exc.path else f"{path}{'' if exc.path.startswith('[') else '.'}{exc.path}"
        detail = exc.message.removeprefix(f"{exc.path}: ") if exc.path else exc.message
        raise ExtensionMetadataError(MetadataErrorCode.INVALID_X402_VALUE, detail, where) from exc
