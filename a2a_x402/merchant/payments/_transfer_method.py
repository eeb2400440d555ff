"""How the merchant's token is paid: by its own EIP-3009 `transferWithAuthorization`, or through Permit2.

`X402_ASSET_TRANSFER_METHOD=auto` asks the token once, at start-up: a token with EIP-3009 answers
`authorizationState(address,bytes32)` with one 32-byte word; any other answer (a revert, nothing) means it has
none, and its payments go through Permit2.
"""

from __future__ import annotations

import logging
from enum import StrEnum

from eth_utils.crypto import keccak

from a2a_x402.facilitator import ChainError, ChainUnavailableError, RpcClient

__all__ = ["TransferMethod", "probe_transfer_method"]

logger = logging.getLogger(__name__)

# `authorizationState(address(0), bytes32(0))`: any EIP-3009 token answers it, with false.
_PROBE = "0x" + (keccak(text="authorizationState(address,bytes32)")[:4] + bytes(64)).hex()
_WORD_HEX_CHARS = 2 + 64


class TransferMethod(StrEnum):
    """How a payment moves the token."""

    EIP3009 = "eip3009"
    """The token's own `transferWithAuthorization` (the `exact` scheme's default)."""
    PERMIT2 = "permit2"
    """A Permit2 witness transfer through the x402 proxy (`extra.assetTransferMethod: "permit2"`)."""


async def probe_transfer_method(rpc: RpcClient, asset: str) -> TransferMethod:
    """EIP-3009 if `asset` answers `authorizationState` as an EIP-3009 token does, else Permit2.

    A node that cannot be reached tells nothing: the token is then taken for an EIP-3009 one, as before
    this setting existed, and a WARNING line says so (set `X402_ASSET_TRANSFER_METHOD` to be sure).
    """
    try:
        reply = await rpc.call("eth_call", {"to": asset, "data": _PROBE}, "latest")
    except ChainUnavailableError as exc:
        logger.warning(
            "cannot ask %s whether it has EIP-3009 (%s): its terms ask for EIP-3009; "
            "set X402_ASSET_TRANSFER_METHOD to eip3009 or permit2 to say it",
            asset,
            exc,
        )
        return TransferMethod.EIP3009
    except ChainError:
        return TransferMethod.PERMIT2  # the call reverted: no such function
    has_eip3009 = isinstance(reply, str) and len(reply) == _WORD_HEX_CHARS
    return TransferMethod.EIP3009 if has_eip3009 else TransferMethod.PERMIT2
