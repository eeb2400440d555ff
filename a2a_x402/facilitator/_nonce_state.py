"""Whether an authorization's nonce is used on chain, for either transfer method.

An EIP-3009 authorization is keyed by its token, which answers `authorizationState(payer, nonce)`; a Permit2
one by Permit2 itself (a claim's asset is then Permit2's address), whose `nonceBitmap(payer, word)` holds the
nonce's bit. Either is used once a transfer spent it, or once the payer cancelled it (EIP-3009's
`cancelAuthorization`, Permit2's `invalidateUnorderedNonces`): nothing can spend it again.
"""

from __future__ import annotations

from ._permit2 import PERMIT2_ADDRESS
from ._permit2_calls import encode_nonce_bitmap
from ._rpc import RpcClient
from ._token import decode_bool, decode_uint, encode_authorization_state
from .wire import Reason

__all__ = ["authorization_used", "is_permit2", "nonce_used_reason", "read_used", "used_call"]


def is_permit2(asset: str) -> bool:
    """Whether a claim key's `asset` names Permit2 (a Permit2 authorization) rather than a token."""
    return asset == PERMIT2_ADDRESS


def used_call(asset: str, payer: str, nonce: str) -> dict[str, str]:
    """The `eth_call` object that reads whether `payer`'s `nonce` (0x hex, 32 bytes) is used at `asset`."""
    if is_permit2(asset):
        return {"to": PERMIT2_ADDRESS, "data": encode_nonce_bitmap(payer, int(nonce, 16))}
    return {"to": asset, "data": encode_authorization_state(payer, bytes.fromhex(nonce[2:]))}


def read_used(asset: str, nonce: str, reply: str) -> bool:
    """Whether the reply to `used_call(asset, …, nonce)` says the nonce is used."""
    if is_permit2(asset):
        return bool(decode_uint(reply) >> (int(nonce, 16) & 0xFF) & 1)
    return decode_bool(reply)


def nonce_used_reason(asset: str) -> Reason:
    """The x402 reason of an authorization refused because its nonce is used (as the SDKs word it)."""
    return Reason.PERMIT2_INVALID_NONCE if is_permit2(asset) else Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED


async def authorization_used(
    rpc: RpcClient, asset: str, payer: str, nonce: str, block: str = "latest"
) -> bool:
    """Whether `payer`'s authorization `nonce` is used (or cancelled) at `asset`: an EIP-3009 token, or
    Permit2 for a Permit2 authorization."""
    return read_used(asset, nonce, await rpc.call("eth_call", used_call(asset, payer, nonce), block))
