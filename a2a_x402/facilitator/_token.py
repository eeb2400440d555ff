"""ABI of the EIP-3009 token calls and logs the facilitator uses (USDC v2.2 compatible).

The calls are encoded by hand, word by word: their types are fixed (addresses, uint256, bytes32 and at most
one trailing `bytes`), and eth-abi's generic encoder, which infers and validates each value through
several layers, cost about 60 µs of the settle path per payment. A test checks the bytes against eth-abi's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi.abi import decode as abi_decode
from eth_utils.crypto import keccak

from .wire import checksum_address

__all__ = [
    "AUTHORIZATION_USED_TOPIC",
    "ERC1271_MAGIC",
    "TRANSFER_TOPIC",
    "Authorization",
    "TransferLog",
    "address_word",
    "bytes32_word",
    "decode_bool",
    "decode_string",
    "decode_uint",
    "encode_authorization_state",
    "encode_balance_of",
    "encode_is_blacklisted",
    "encode_is_valid_signature",
    "encode_name",
    "encode_paused",
    "encode_transfer_with_authorization",
    "encode_version",
    "transfer_logs",
    "uint_word",
]


def _selector(signature: str) -> bytes:
    return keccak(text=signature)[:4]


_NAME = _selector("name()")
_VERSION = _selector("version()")
_BALANCE_OF = _selector("balanceOf(address)")
_AUTHORIZATION_STATE = _selector("authorizationState(address,bytes32)")
_TRANSFER_VRS = _selector(
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)"
)
_TRANSFER_BYTES = _selector(
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
)
_IS_VALID_SIGNATURE = _selector("isValidSignature(bytes32,bytes)")
_PAUSED = _selector("paused()")
_IS_BLACKLISTED = _selector("isBlacklisted(address)")

ERC1271_MAGIC = _IS_VALID_SIGNATURE
AUTHORIZATION_USED_TOPIC = "0x" + keccak(text="AuthorizationUsed(address,bytes32)").hex()
TRANSFER_TOPIC = "0x" + keccak(text="Transfer(address,address,uint256)").hex()


@dataclass(frozen=True, slots=True)
class Authorization:
    """The fields of an EIP-3009 TransferWithAuthorization, as integers and raw bytes."""

    from_: str
    to: str
    value: int
    valid_after: int
    valid_before: int
    nonce: bytes
    signature: bytes


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def address_word(address: str) -> bytes:
    """An ABI `address` word: the 20 bytes, left-padded to 32.

    Raises:
        ValueError: `address` is not 0x and 40 hex digits.
    """
    raw = bytes.fromhex(address[2:])
    if len(raw) != 20 or address[:2] not in ("0x", "0X"):
        raise ValueError(f"not an address: {address!r}")
    return bytes(12) + raw


def uint_word(value: int) -> bytes:
    """An ABI `uint256` word (big-endian).

    Raises:
        OverflowError: `value` is negative or does not fit in 256 bits.
    """
    return value.to_bytes(32, "big")


def bytes32_word(value: bytes) -> bytes:
    """An ABI `bytes32` word.

    Raises:
        ValueError: `value` is not exactly 32 bytes.
    """
    if len(value) != 32:
        raise ValueError(f"expected 32 bytes, got {len(value)}")
    return value


def _dynamic_bytes(value: bytes) -> bytes:
    """The tail of an ABI `bytes` value: its length, then the bytes padded to a whole number of words."""
    return uint_word(len(value)) + value + bytes(-len(value) % 32)


def encode_name() -> str:
    """Calldata for `name()`."""
    return _hex(_NAME)


def encode_version() -> str:
    """Calldata for `version()`."""
    return _hex(_VERSION)


def encode_balance_of(owner: str) -> str:
    """Calldata for `balanceOf(owner)`."""
    return _hex(_BALANCE_OF + address_word(owner))


def encode_paused() -> str:
    """Calldata for FiatToken's `paused()`."""
    return _hex(_PAUSED)


def encode_is_blacklisted(account: str) -> str:
    """Calldata for FiatToken's `isBlacklisted(account)`."""
    return _hex(_IS_BLACKLISTED + address_word(account))


def encode_authorization_state(authorizer: str, nonce: bytes) -> str:
    """Calldata for `authorizationState(authorizer, nonce)`."""
    return _hex(_AUTHORIZATION_STATE + address_word(authorizer) + bytes32_word(nonce))


def encode_is_valid_signature(digest: bytes, signature: bytes) -> str:
    """Calldata for ERC-1271 `isValidSignature(digest, signature)`."""
    # The head: the digest, then the offset of the signature's tail (two words in).
    return _hex(_IS_VALID_SIGNATURE + bytes32_word(digest) + uint_word(64) + _dynamic_bytes(signature))


def encode_transfer_with_authorization(auth: Authorization) -> str:
    """Calldata for `transferWithAuthorization`.

    A 65-byte signature uses the (v, r, s) overload, which every FiatToken v2 has; anything else (ERC-1271
    contract wallets) needs the `bytes signature` overload added in v2.2.
    """
    head = b"".join(
        (
            address_word(auth.from_),
            address_word(auth.to),
            uint_word(auth.value),
            uint_word(auth.valid_after),
            uint_word(auth.valid_before),
            bytes32_word(auth.nonce),
        )
    )
    sig = auth.signature
    if len(sig) == 65:
        v = sig[64] if sig[64] >= 27 else sig[64] + 27
        return _hex(_TRANSFER_VRS + head + uint_word(v) + sig[:32] + sig[32:64])
    # Seven head words, the last the offset of the signature's tail.
    return _hex(_TRANSFER_BYTES + head + uint_word(7 * 32) + _dynamic_bytes(sig))


def decode_string(result: str) -> str:
    """Decode an ABI `string` return value."""
    (value,) = abi_decode(["string"], bytes.fromhex(result.removeprefix("0x")))
    return str(value)


def decode_uint(result: str) -> int:
    """Decode an ABI `uint256` return value."""
    return int(result, 16) if result not in ("0x", "") else 0


def decode_bool(result: str) -> bool:
    """Decode an ABI `bool` return value."""
    return decode_uint(result) != 0


@dataclass(frozen=True, slots=True)
class TransferLog:
    """An ERC-20 Transfer event."""

    token: str
    from_: str
    to: str
    value: int


def transfer_logs(receipt: dict[str, Any]) -> list[TransferLog]:
    """Every ERC-20 Transfer event in a transaction receipt (a JSON-RPC receipt object)."""
    found = []
    for log in receipt.get("logs") or []:
        topics = log.get("topics", [])
        if len(topics) == 3 and topics[0] == TRANSFER_TOPIC:
            found.append(
                TransferLog(
                    token=checksum_address(log["address"]),
                    from_=checksum_address("0x" + topics[1][-40:]),
                    to=checksum_address("0x" + topics[2][-40:]),
                    value=decode_uint(log["data"]),
                )
            )
    return found
