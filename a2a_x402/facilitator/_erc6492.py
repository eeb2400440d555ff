"""ERC-6492 signatures of counterfactual wallets, and the Multicall3 batch that deploys and pays in one go.

An ERC-6492 signature is `abi.encode(factory, factoryCalldata, innerSignature) ‖ 0x6492…6492`: the wallet
does not exist yet, and calling `factory` with `factoryCalldata` deploys it at `authorization.from`, after
which it checks `innerSignature` through ERC-1271. Neither USDC nor any ERC-1271 wallet reads the wrapper,
so the facilitator unwraps it, and for a wallet still without code runs the factory call and the transfer
in one transaction through Multicall3's `aggregate3`: the deployment never happens without the payment.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi.abi import decode as abi_decode
from eth_abi.abi import encode as abi_encode
from eth_abi.exceptions import DecodingError
from eth_utils.crypto import keccak

from ._errors import PaymentInvalidError
from .wire import Reason, checksum_address

__all__ = [
    "ERC6492_MAGIC",
    "MULTICALL3_ADDRESS",
    "Call3",
    "Erc6492Signature",
    "decode_aggregate3",
    "encode_aggregate3",
    "revert_message",
    "unwrap_erc6492",
]

ERC6492_MAGIC = bytes.fromhex("6492" * 16)
# Multicall3 has this address on every public EVM chain; the dev chain puts its own at the same place.
MULTICALL3_ADDRESS = "0xcA11bde05977b3631167028862bE2a173976CA11"

_AGGREGATE3 = keccak(text="aggregate3((address,bool,bytes)[])")[:4]
_ERROR_STRING = keccak(text="Error(string)")[:4]


@dataclass(frozen=True, slots=True)
class Erc6492Signature:
    """The three parts of an ERC-6492 wrapper."""

    factory: str
    factory_calldata: bytes
    signature: bytes


@dataclass(frozen=True, slots=True)
class Call3:
    """One call of a Multicall3 `aggregate3` batch."""

    target: str
    allow_failure: bool
    calldata: bytes


def unwrap_erc6492(signature: bytes) -> Erc6492Signature | None:
    """The parts of an ERC-6492 signature, or None if `signature` does not end with the magic suffix.

    Raises:
        PaymentInvalidError: the signature ends with the suffix but the rest is not a well-formed
            `abi.encode(address, bytes, bytes)`, or wraps an empty or another wrapped signature.
    """
    if not signature.endswith(ERC6492_MAGIC):
        return None
    try:
        factory, calldata, inner = abi_decode(
            ["address", "bytes", "bytes"], signature[: -len(ERC6492_MAGIC)], strict=True
        )
    except (DecodingError, ValueError, OverflowError) as exc:
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE,
            "the ERC-6492 signature is not abi.encode(address factory, bytes calldata, bytes signature)",
        ) from exc
    if not inner or inner.endswith(ERC6492_MAGIC):
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE,
            "the ERC-6492 signature wraps an empty or another ERC-6492 signature",
        )
    return Erc6492Signature(factory=checksum_address(factory), factory_calldata=calldata, signature=inner)


def encode_aggregate3(calls: list[Call3]) -> str:
    """Calldata for Multicall3 `aggregate3(calls)`."""
    encoded = abi_encode(
        ["(address,bool,bytes)[]"], [[(call.target, call.allow_failure, call.calldata) for call in calls]]
    )
    return "0x" + (_AGGREGATE3 + encoded).hex()


def decode_aggregate3(result: str) -> list[tuple[bool, bytes]]:
    """The (success, return data) of each call, from what an `aggregate3` eth_call returned.

    Raises:
        DecodingError: the result is not an `aggregate3` answer (no Multicall3 at the address).
    """
    (results,) = abi_decode(["(bool,bytes)[]"], bytes.fromhex(result.removeprefix("0x")))
    return [(bool(success), bytes(data)) for success, data in results]


def revert_message(data: bytes) -> str:
    """The reason string of a revert's return data, or a short description when it carries none."""
    if data[:4] == _ERROR_STRING:
        try:
            (message,) = abi_decode(["string"], data[4:])
        except (DecodingError, ValueError, OverflowError):
            pass
        else:
            return str(message)
    return f"reverted with 0x{data.hex()}" if data else "reverted without a reason"
