"""Strict scalar types: addresses, uint256/uint64 strings, bytes32, signatures, texts, JSON objects."""

from __future__ import annotations

from typing import Any

import pytest
from eth_utils.address import to_checksum_address

from a2a_x402.facilitator.wire import (
    MAX_SIGNATURE_BYTES,
    Address,
    Bytes32,
    PaymentRequirements,
    PaymentRequirementsV1,
    Reason,
    Signature,
    TxHash,
    Uint256,
    UnixTime,
    WireError,
    WireModel,
)

from . import documents as docs


class _Probe(WireModel):
    """One field of each scalar type, so each can be fed wire values on its own."""

    address: Address | None = None
    amount: Uint256 | None = None
    time: UnixTime | None = None
    nonce: Bytes32 | None = None
    signature: Signature | None = None
    tx: TxHash | None = None


def _probe(**fields: object) -> _Probe:
    return _Probe.from_wire(fields)


def _probe_error(**fields: object) -> WireError:
    with pytest.raises(WireError) as caught:
        _Probe.from_wire(fields)
    return caught.value


# --- Address ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [docs.MERCHANT, docs.MERCHANT.lower(), "0x" + docs.MERCHANT[2:].upper()],
    ids=["checksummed", "lower", "upper"],
)
def test_address_is_normalised_to_eip55(given: str) -> None:
    assert _probe(address=given).address == docs.MERCHANT


def test_address_of_digits_only_is_accepted() -> None:
    assert _probe(address="0x" + "1" * 40).address == "0x" + "1" * 40


def test_address_with_bad_checksum_is_refused() -> None:
    # Flip the case of one letter of a valid checksummed address.
    bad = docs.MERCHANT.replace("C", "c", 1)
    assert bad != docs.MERCHANT and to_checksum_address(bad) == docs.MERCHANT
    error = _probe_error(address=bad)
    assert error.message == "address: mixed-case address fails its EIP-55 checksum"
    assert error.reason is Reason.INVALID_PAYLOAD


@pytest.mark.parametrize(
    "bad",
    [
        docs.MERCHANT[:-1],
        docs.MERCHANT + "0",
        "0X" + docs.MERCHANT[2:],
        docs.MERCHANT[2:],
        "0x" + "g" * 40,
        " " + docs.MERCHANT,
        docs.MERCHANT + "\n",
        "0x" + "٣" * 40,
        "",
    ],
    ids=["short", "long", "0X", "no-prefix", "non-hex", "space", "newline", "unicode-digits", "empty"],
)
def test_address_of_wrong_shape_is_refused(bad: str) -> None:
    error = _probe_error(address=bad)
    assert error.message == "address: expected 0x followed by 40 hex digits (a 20-byte address)"


@pytest.mark.parametrize(
    ("bad", "kind"),
    [(123, "an integer"), ({}, "an object"), ([docs.MERCHANT], "an array"), (True, "a boolean")],
)
def test_address_of_wrong_json_type_is_refused(bad: object, kind: str) -> None:
    assert _probe_error(address=bad).message == f"address: expected a string, got {kind}"


# --- Uint256 / UnixTime ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["0", "1", "10000", str(2**256 - 1)])
def test_uint256_accepts_canonical_decimals(text: str) -> None:
    parsed = _probe(amount=text)
    assert parsed.amount == int(text)
    assert parsed.to_json_dict() == {"amount": text}


UINT_SHAPE = (
    "amount: expected an unsigned decimal integer string of at most 78 digits"
    " (no sign, spaces or leading zeros)"
)


@pytest.mark.parametrize(
    "bad",
    ["-1", "+1", " 1", "1 ", "01", "00", "1.0", "1e3", "0x10", "1_000", "", "٣", "9" * 79],
    ids=[
        "neg",
        "plus",
        "lead-space",
        "trail-space",
        "lead-zero",
        "zeros",
        "fraction",
        "exp",
        "hex",
        "underscore",
        "empty",
        "unicode-digit",
        "79-digits",
    ],
)
def test_uint256_refuses_non_canonical_decimals(bad: str) -> None:
    assert _probe_error(amount=bad).message == UINT_SHAPE


def test_uint256_refuses_2_pow_256() -> None:
    assert _probe_error(amount=str(2**256)).message == "amount: out of range for uint256"


@pytest.mark.parametrize(("bad", "kind"), [(10000, "an integer"), (1.5, "a number"), (True, "a boolean")])
def test_uint256_refuses_json_numbers_on_the_wire(bad: object, kind: str) -> None:
    assert _probe_error(amount=bad).message == f"amount: expected a decimal string, got {kind}"


def test_uint256_accepts_python_ints_in_code_but_not_bools_or_out_of_range() -> None:
    assert _Probe(amount=10_000).to_json_dict() == {"amount": "10000"}
    with pytest.raises(ValueError, match="expected a decimal string, got a boolean"):
        _Probe(amount=True)
    with pytest.raises(ValueError, match="out of range for uint256"):
        _Probe(amount=-1)


def test_unix_time_is_bounded_by_uint64() -> None:
    assert _probe(time=str(2**64 - 1)).time == 2**64 - 1
    assert _probe_error(time=str(2**64)).message == "time: out of range for uint64"
    assert "at most 20 digits" in _probe_error(time="1" * 21).message


# --- Bytes32 / TxHash / Signature --------------------------------------------------------------------


def test_bytes32_is_lower_cased() -> None:
    assert _probe(nonce="0x" + "AB" * 32).nonce == "0x" + "ab" * 32


@pytest.mark.parametrize("bad", ["0x" + "ab" * 31, "0x" + "ab" * 33, "0x" + "zz" * 32, "ab" * 33, 5])
def test_bytes32_of_wrong_shape_is_refused(bad: object) -> None:
    assert _probe_error(nonce=bad).message.startswith("nonce: expected ")


def test_tx_hash_may_be_empty_but_not_short() -> None:
    assert _probe(tx="").tx == ""
    assert _probe(tx=docs.TX_HASH.upper().replace("0X", "0x")).tx == docs.TX_HASH
    assert (
        _probe_error(tx="0x").message
        == 'tx: expected "" or 0x followed by 64 hex digits (a transaction hash)'
    )


@pytest.mark.parametrize("size", [1, 65, 66, 1000, MAX_SIGNATURE_BYTES])
def test_signature_accepts_1_to_max_bytes(size: int) -> None:
    assert _probe(signature="0x" + "Ab" * size).signature == "0x" + "ab" * size


@pytest.mark.parametrize(
    "bad",
    ["0x", "0x" + "ab" * (MAX_SIGNATURE_BYTES + 1), "0x" + "a" * 131, "0x" + "zz" * 65, "ab" * 65],
    ids=["empty", "too-long", "odd", "non-hex", "no-prefix"],
)
def test_signature_of_wrong_shape_is_refused(bad: str) -> None:
    message = _probe_error(signature=bad).message
    assert message == ("signature: expected 0x followed by an even number of hex digits, 1 to 4096 bytes")


# --- texts, timeouts and free-form objects, through the fields that use them ----------------------------


def _requirements_error(**changes: Any) -> WireError:
    doc = docs.requirements_v2() | changes
    with pytest.raises(WireError) as caught:
        PaymentRequirements.from_wire(doc)
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS
    return caught.value


def test_scheme_length_and_shape() -> None:
    assert PaymentRequirements.from_wire(docs.requirements_v2() | {"scheme": "a" * 32}).scheme == "a" * 32
    assert _requirements_error(scheme="a" * 33).message == "scheme: too long (at most 32 characters)"
    assert _requirements_error(scheme="").message == "scheme: must not be empty"
    assert _requirements_error(scheme="Exact").message == (
        "scheme: expected a lower-case scheme name such as exact"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [("a\x00b", "NUL characters are not allowed"), ("a\ud800b", "lone UTF-16 surrogates are not allowed")],
)
def test_texts_refuse_characters_storage_cannot_hold(text: str, problem: str) -> None:
    doc = docs.requirements_v1() | {"description": text}
    with pytest.raises(WireError, match=f"^description: {problem}$"):
        PaymentRequirementsV1.from_wire(doc)


@pytest.mark.parametrize(("value", "ok"), [(1, True), (31_536_000, True), (0, False), (31_536_001, False)])
def test_max_timeout_seconds_bounds(value: int, ok: bool) -> None:
    doc = docs.requirements_v2() | {"maxTimeoutSeconds": value}
    if ok:
        assert PaymentRequirements.from_wire(doc).max_timeout_seconds == value
    else:
        with pytest.raises(WireError, match="^maxTimeoutSeconds: expected 1 to 31536000 seconds$"):
            PaymentRequirements.from_wire(doc)


@pytest.mark.parametrize(("bad", "kind"), [("60", "a string"), (60.0, "a number"), (True, "a boolean")])
def test_max_timeout_seconds_must_be_a_json_integer(bad: object, kind: str) -> None:
    assert _requirements_error(maxTimeoutSeconds=bad).message == (
        f"maxTimeoutSeconds: expected an integer, got {kind}"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({f"k{i}": i for i in range(17)}, "too many keys (at most 16)"),
        ({"name": "x" * 2100}, "too large (at most 2048 bytes of JSON)"),
        ({"a": {"b": {"c": {"d": {}}}}}, "nested too deeply (at most 4 levels)"),
        ({"a": [[[[1]]]]}, "nested too deeply (at most 4 levels)"),
        ({"a": float("nan")}, "NaN and infinite numbers are not JSON"),
        ({"a": 2**256}, "integer too large"),
        ({"k" * 129: 1}, "object keys must be at most 128 plain characters"),
        ({"a": "\x00"}, "NUL characters are not allowed"),
        ({1: "a"}, "object keys must be strings"),
        ({"a": b"bytes"}, "expected JSON values only, got a Python bytes"),
        ({"a": list(range(10**6))}, "too large (at most 2048 bytes of JSON)"),
        ([], "expected an object, got an array"),
    ],
)
def test_extra_objects_are_bounded(extra: object, message: str) -> None:
    assert _requirements_error(extra=extra).message == f"extra: {message}"


def test_extra_is_copied_so_later_edits_do_not_reach_the_model() -> None:
    extra: dict[str, Any] = {"name": "USDC", "version": "2", "nested": {"a": [1]}}
    parsed = PaymentRequirements.from_wire(docs.requirements_v2() | {"extra": extra})
    extra["nested"]["a"].append(2)
    assert parsed.extra == {"name": "USDC", "version": "2", "nested": {"a": [1]}}
