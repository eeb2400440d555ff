"""Strict scalar and object types shared by every x402 document.

Each type is an `Annotated` pydantic type whose validator accepts exactly one wire form and
raises a message that says what was expected and never quotes the input.

| type         | wire form                                     | Python value                      |
| ------------ | --------------------------------------------- | --------------------------------- |
| Address      | 0x + 40 hex; all-lower, all-upper or EIP-55   | str, EIP-55 checksummed           |
| Uint256      | decimal string, no sign/space/leading zero    | int, 0 <= n < 2**256 (78 digits)  |
| UnixTime     | the same, within uint64                       | int, unix seconds                 |
| Bytes32      | 0x + 64 hex                                   | str, lower-case hex               |
| TxHash       | "" or 0x + 64 hex                             | str, lower-case hex or ""         |
| Signature    | 0x + even hex, 1..MAX_SIGNATURE_BYTES bytes   | str, lower-case hex               |
| texts        | strings of the bounded lengths defined below  | str                               |
| JSON objects | objects bounded in keys, size and depth       | dict (a private copy)             |

Uint256 and UnixTime reject JSON numbers when parsed from the wire (`WIRE_CONTEXT`), but accept
Python ints when a model is built in code, so `PaymentRequirements(amount=10_000, ...)` works.
Strings are also checked for NUL characters and lone surrogates, which PostgreSQL and every
UTF-8 encoder refuse: such input must fail here, not deep inside storage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Annotated, Any, Final, NoReturn

from eth_utils.crypto import keccak
from pydantic import PlainSerializer, PlainValidator, ValidationInfo
from pydantic_core import PydanticCustomError

from ._errors import VERSION_ERROR_TYPE, json_type_name

__all__ = [
    "checksum_address",
    "MAX_SIGNATURE_BYTES",
    "WIRE_CONTEXT",
    "Address",
    "Bytes32",
    "Description",
    "ErrorMessage",
    "ExtensionName",
    "Extensions",
    "KindExtra",
    "MimeType",
    "OutputSchema",
    "ReasonText",
    "RequirementsExtra",
    "ResponseExtra",
    "Scheme",
    "ServiceName",
    "Signature",
    "Tag",
    "TimeoutSeconds",
    "TxHash",
    "UnixTime",
    "Uint256",
    "Url",
    "WireBool",
    "fail",
    "text_problem",
    "version",
]

# Contract wallets (EIP-1271) and ERC-6492 wrappers sign with more than the 65 bytes of an EOA;
# 4 KiB covers passkey wallets wrapped with their deployment calldata.
MAX_SIGNATURE_BYTES: Final = 4096
# Passed as the validation context by `from_wire`; see the module docstring.
WIRE_CONTEXT: Final[Mapping[str, bool]] = {"x402_wire": True}

_HEX_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_HEX_BYTES32 = re.compile(r"0x[0-9a-fA-F]{64}")
_HEX_EVEN = re.compile(r"0x(?:[0-9a-fA-F]{2})+")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_SCHEME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def fail(message: str) -> NoReturn:
    """Reject the value being validated with `message`, which must not quote the input."""
    raise PydanticCustomError("wire_value", message)


def _is_wire(info: ValidationInfo) -> bool:
    context = info.context
    return isinstance(context, Mapping) and bool(context.get("x402_wire"))


def _require_str(value: object, expected: str = "a string") -> str:
    if not isinstance(value, str):
        fail(f"expected {expected}, got {json_type_name(value)}")
    # A str subclass (a StrEnum member, say) is stored as a plain str.
    return value if type(value) is str else str.__str__(value)


def text_problem(text: str) -> str | None:
    """Say what is wrong with characters of `text` that storage and encoders refuse, if anything."""
    if "\x00" in text:
        return "NUL characters are not allowed"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "lone UTF-16 surrogates are not allowed"
    return None


# --- hex and numbers -----------------------------------------------------------------------------


@lru_cache(maxsize=65_536)
def checksum_address(address: str) -> str:
    """The EIP-55 form of a 0x-prefixed 20-byte hex address (cached: a payment names the same few
    addresses over and over, and eth-utils' conversion costs a keccak and several validations each time)."""
    digits = address[2:].lower()
    hashed = keccak(text=digits).hex()
    return "0x" + "".join(
        c.upper() if int(h, 16) >= 8 else c for c, h in zip(digits, hashed[:40], strict=True)
    )


def _validate_address(value: object) -> str:
    text = _require_str(value)
    if len(text) != 42 or not _HEX_ADDRESS.fullmatch(text):
        fail("expected 0x followed by 40 hex digits (a 20-byte address)")
    digits = text[2:]
    checksummed = checksum_address(text)
    # All-lower and all-upper carry no checksum; mixed case claims one and must honour it.
    if digits not in (digits.lower(), digits.upper()) and checksummed != text:
        fail("mixed-case address fails its EIP-55 checksum")
    return checksummed


def _validate_bytes32(value: object) -> str:
    text = _require_str(value)
    if len(text) != 66 or not _HEX_BYTES32.fullmatch(text):
        fail("expected 0x followed by 64 hex digits")
    return text.lower()


def _validate_tx_hash(value: object) -> str:
    text = _require_str(value)
    if text == "":
        return text
    if len(text) != 66 or not _HEX_BYTES32.fullmatch(text):
        fail('expected "" or 0x followed by 64 hex digits (a transaction hash)')
    return text.lower()


def _validate_signature(value: object) -> str:
    text = _require_str(value)
    if len(text) > 2 + 2 * MAX_SIGNATURE_BYTES or not _HEX_EVEN.fullmatch(text):
        fail(f"expected 0x followed by an even number of hex digits, 1 to {MAX_SIGNATURE_BYTES} bytes")
    return text.lower()


def _uint(bits: int, max_digits: int) -> Callable[[object, ValidationInfo], int]:
    limit = 1 << bits

    def validate(value: object, info: ValidationInfo) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and not _is_wire(info):
            if not 0 <= value < limit:
                fail(f"out of range for uint{bits}")
            return value
        text = _require_str(value, "a decimal string")
        if len(text) > max_digits or not _DECIMAL.fullmatch(text):
            fail(
                f"expected an unsigned decimal integer string of at most {max_digits} digits"
                " (no sign, spaces or leading zeros)"
            )
        number = int(text)
        if number >= limit:
            fail(f"out of range for uint{bits}")
        return number

    return validate


_decimal_string = PlainSerializer(str, return_type=str, when_used="json")

Address = Annotated[str, PlainValidator(_validate_address, json_schema_input_type=str)]
Bytes32 = Annotated[str, PlainValidator(_validate_bytes32, json_schema_input_type=str)]
TxHash = Annotated[str, PlainValidator(_validate_tx_hash, json_schema_input_type=str)]
Signature = Annotated[str, PlainValidator(_validate_signature, json_schema_input_type=str)]
Uint256 = Annotated[int, PlainValidator(_uint(256, 78), json_schema_input_type=str), _decimal_string]
UnixTime = Annotated[int, PlainValidator(_uint(64, 20), json_schema_input_type=str), _decimal_string]


def _validate_bool(value: object) -> bool:
    if not isinstance(value, bool):
        fail(f"expected a boolean, got {json_type_name(value)}")
    return value


WireBool = Annotated[bool, PlainValidator(_validate_bool, json_schema_input_type=bool)]

# The longest window a payer is asked to keep an authorization open for: one year. Real offers
# use minutes; the bound only keeps absurd values out of arithmetic on validBefore.
_MAX_TIMEOUT_SECONDS: Final = 365 * 24 * 3600


def _validate_timeout(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        fail(f"expected an integer, got {json_type_name(value)}")
    if not 1 <= value <= _MAX_TIMEOUT_SECONDS:
        fail(f"expected 1 to {_MAX_TIMEOUT_SECONDS} seconds")
    return value


TimeoutSeconds = Annotated[int, PlainValidator(_validate_timeout, json_schema_input_type=int)]


def version(*accepted: int) -> PlainValidator:
    """A validator for `x402Version` fields that accepts only the integers in `accepted`.

    Booleans, strings and floats (even 2.0) are refused: turning protobuf doubles back into
    integers is the A2A layer's job, not something to guess at here.
    """
    expected = " or ".join(str(v) for v in accepted)

    def validate(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise PydanticCustomError(
                VERSION_ERROR_TYPE, f"expected the integer {expected}, got {json_type_name(value)}"
            )
        if value not in accepted:
            got = f", got {value}" if -1000 < value < 1000 else ""
            raise PydanticCustomError(VERSION_ERROR_TYPE, f"expected {expected}{got}")
        return value

    return PlainValidator(validate, json_schema_input_type=int)


# --- texts ---------------------------------------------------------------------------------------


def _text(
    max_length: int, *, min_length: int = 0, pattern: re.Pattern[str] | None = None, shape: str = ""
) -> PlainValidator:
    def validate(value: object) -> str:
        text = _require_str(value)
        if len(text) > max_length:
            fail(f"too long (at most {max_length} characters)")
        if len(text) < min_length:
            fail("must not be empty" if min_length == 1 else f"too short (at least {min_length} characters)")
        if pattern is not None and not pattern.fullmatch(text):
            fail(f"expected {shape}")
        problem = text_problem(text)
        if problem is not None:
            fail(problem)
        return text

    return PlainValidator(validate, json_schema_input_type=str)


Scheme = Annotated[
    str, _text(32, min_length=1, pattern=_SCHEME, shape="a lower-case scheme name such as exact")
]
Url = Annotated[str, _text(2048, min_length=1)]
Description = Annotated[str, _text(1024)]
MimeType = Annotated[str, _text(128)]
ServiceName = Annotated[str, _text(32)]
Tag = Annotated[str, _text(32, min_length=1)]
ErrorMessage = Annotated[str, _text(1024)]
ReasonText = Annotated[str, _text(256, min_length=1)]
ExtensionName = Annotated[str, _text(128, min_length=1)]


# --- JSON objects --------------------------------------------------------------------------------

_MAX_KEY_CHARS: Final = 128
# Integers inside free-form objects stay within uint256; larger ones are not amounts of anything.
_MAX_INT_BITS: Final = 256


def _copy_json(value: Any) -> Any:
    """A copy of a JSON value (its objects and arrays new, strings and numbers shared: they are immutable);
    `copy.deepcopy`'s memo and dispatch cost several times more on the settle path."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value


def _json_object(*, max_keys: int, max_bytes: int, max_depth: int) -> PlainValidator:
    """A validator for a free-form JSON object, bounded so it cannot be used to bloat storage.

    The size is the length of its compact JSON encoding, estimated while walking (strings count
    their characters), and the walk stops as soon as any bound is passed, so the cost of
    rejecting a huge value is bounded too.
    """

    def validate(value: object) -> dict[str, Any]:
        if not isinstance(value, dict):
            fail(f"expected an object, got {json_type_name(value)}")
        if len(value) > max_keys:
            fail(f"too many keys (at most {max_keys})")
        size = 0

        def grow(amount: int) -> None:
            nonlocal size
            size += amount
            if size > max_bytes:
                fail(f"too large (at most {max_bytes} bytes of JSON)")

        stack: list[tuple[object, int]] = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, dict | list):
                if depth > max_depth:
                    fail(f"nested too deeply (at most {max_depth} levels)")
                # Charge the separators before pushing children, so a huge array fails at once.
                grow(2 + len(item))
                if isinstance(item, list):
                    stack.extend((child, depth + 1) for child in item)
                    continue
                for key, child in item.items():
                    if not isinstance(key, str):
                        fail("object keys must be strings")
                    if len(key) > _MAX_KEY_CHARS or text_problem(key) is not None:
                        fail(f"object keys must be at most {_MAX_KEY_CHARS} plain characters")
                    grow(len(key) + 3)
                    stack.append((child, depth + 1))
            elif isinstance(item, str):
                grow(len(item) + 2)
                problem = text_problem(item)
                if problem is not None:
                    fail(problem)
            elif isinstance(item, bool) or item is None:
                grow(5)
            elif isinstance(item, int):
                if item.bit_length() > _MAX_INT_BITS:
                    fail("integer too large")
                grow(item.bit_length() // 3 + 2)
            elif isinstance(item, float):
                if not math.isfinite(item):
                    fail("NaN and infinite numbers are not JSON")
                grow(24)
            else:
                fail(f"expected JSON values only, got {json_type_name(item)}")
        # The model is frozen; a private copy keeps later edits of the caller's dict out of it.
        copied: dict[str, Any] = _copy_json(value)
        return copied

    return PlainValidator(validate, json_schema_input_type=dict[str, Any])


# requirements.extra: for exact/EVM the EIP-712 `name`/`version` and a few scheme hints.
RequirementsExtra = Annotated[dict[str, Any], _json_object(max_keys=16, max_bytes=2048, max_depth=4)]
KindExtra = Annotated[dict[str, Any], _json_object(max_keys=16, max_bytes=2048, max_depth=4)]
ResponseExtra = Annotated[dict[str, Any], _json_object(max_keys=16, max_bytes=4096, max_depth=4)]
# Extensions travel in HTTP headers, which x402 tooling flags above 16 KiB.
Extensions = Annotated[dict[str, Any], _json_object(max_keys=32, max_bytes=16384, max_depth=8)]
OutputSchema = Annotated[dict[str, Any], _json_object(max_keys=64, max_bytes=16384, max_depth=16)]
