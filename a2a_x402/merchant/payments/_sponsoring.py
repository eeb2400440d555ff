"""Whether the merchant's Permit2 terms (`exact` by Permit2, `upto`) declare the x402 `eip2612GasSponsoring`
extension in their top-level `extensions`.

A payer without a Permit2 allowance may send, with its payment, an EIP-2612 permit of Permit2 that the
facilitator relays in the settlement transaction, so it never spends gas on an approval. The x402 SDKs'
clients sign one only when the terms declare the extension (their servers declare it per route, with a
description and the JSON Schema of the `info` the client fills in) and the terms' `extra` names the
token's EIP-712 domain, which ours always does. The merchant declares it when both hold: its token has
EIP-2612 (it answers `DOMAIN_SEPARATOR()` and `nonces(address)` with one word each) and its facilitator's
`/supported` lists the extension. Each is asked once, at the first Permit2 offer, and kept; what could not
be asked (a node or the facilitator down) is asked again at the next offer, which goes out without the
declaration meanwhile: a client may send the permit all the same (our payer does).
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Final

from eth_utils.crypto import keccak

from a2a_x402.facilitator import ChainError, ChainUnavailableError, RpcClient
from a2a_x402.facilitator.wire import EIP2612_GAS_SPONSORING

from ._upto import SupportedSource

__all__ = ["GasSponsoring"]

logger = logging.getLogger(__name__)


_WORD_HEX_CHARS = 2 + 64
# `DOMAIN_SEPARATOR()` and `nonces(address(0))`: an EIP-2612 token answers both with one word.
_PROBES: Final = (
    "0x" + keccak(text="DOMAIN_SEPARATOR()")[:4].hex(),
    "0x" + (keccak(text="nonces(address)")[:4] + bytes(32)).hex(),
)
_ADDRESS = {"type": "string", "pattern": "^0x[a-fA-F0-9]{40}$"}
_UINT = {"type": "string", "pattern": "^[0-9]+$"}
# The `info` a client sends: the field names and shapes the x402 facilitators read.
_INFO_SCHEMA: Final = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "from": {**_ADDRESS, "description": "The payer: the owner of the tokens the permit approves."},
        "asset": {**_ADDRESS, "description": "The token, whose EIP-2612 permit this is."},
        "spender": {**_ADDRESS, "description": "Permit2's canonical address: the spender approved."},
        "amount": {**_UINT, "description": "The value approved: exactly the payment's permitted amount."},
        "nonce": {**_UINT, "description": "The payer's EIP-2612 nonce on the token, nonces(from)."},
        "deadline": {**_UINT, "description": "Unix time after which the permit is void."},
        "signature": {
            "type": "string",
            "pattern": "^0x[a-fA-F0-9]+$",
            "description": "The permit's 65-byte signature, r then s then v, in hex.",
        },
        "version": {
            "type": "string",
            "pattern": r"^[0-9]+(\.[0-9]+)*$",
            "description": "The version of this info's shape.",
        },
    },
    "required": ["from", "asset", "spender", "amount", "nonce", "deadline", "signature", "version"],
}
_DECLARATION: Final = {
    EIP2612_GAS_SPONSORING: {
        "info": {
            "description": (
                "The facilitator relays an EIP-2612 permit of Permit2, signed by the payer, in the "
                "settlement: a payer without a Permit2 allowance needs no approval transaction."
            ),
            "version": "1",
        },
        "schema": _INFO_SCHEMA,
    }
}


class GasSponsoring:
    """Asks, once each, whether the token has EIP-2612 (`rpc`) and the facilitator the extension
    (`supported`); without either source nothing is declared."""

    def __init__(self, supported: SupportedSource | None, rpc: RpcClient | None) -> None:
        self._supported = supported
        self._rpc = rpc
        self._facilitator: bool | None = None
        self._tokens: dict[str, bool] = {}

    async def extensions(self, asset: str) -> dict[str, Any] | None:
        """The `extensions` of Permit2 terms for `asset`: the declaration when both sides support it,
        else None (also while either cannot be asked)."""
        if await self._token_has_eip2612(asset) and await self._facilitator_sponsors():
            return copy.deepcopy(_DECLARATION)
        return None

    async def _token_has_eip2612(self, asset: str) -> bool:
        known = self._tokens.get(asset)
        if known is not None:
            return known
        if self._rpc is None:
            return False
        try:
            replies = [await self._rpc.call("eth_call", {"to": asset, "data": d}, "latest") for d in _PROBES]
        except ChainUnavailableError as exc:
            logger.warning("cannot ask %s whether it has EIP-2612 (%s): asked again next offer", asset, exc)
            return False
        except ChainError:  # a call reverted: no such function
            replies = []
        has = len(replies) == len(_PROBES) and all(
            isinstance(r, str) and len(r) == _WORD_HEX_CHARS for r in replies
        )
        self._tokens[asset] = has
        return has

    async def _facilitator_sponsors(self) -> bool:
        if self._facilitator is not None:
            return self._facilitator
        if self._supported is None:
            return False
        try:
            answer = await self._supported()
        except (ChainUnavailableError, ValueError) as exc:  # no connection; no /supported answer in its body
            logger.warning("the facilitator's /supported could not be read (%s): asked again next offer", exc)
            return False
        self._facilitator = EIP2612_GAS_SPONSORING in answer.extensions
        return self._facilitator
