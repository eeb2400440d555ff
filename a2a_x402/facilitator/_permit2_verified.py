"""What a verified Permit2 payment hands its settlement (`VerifiedPermit2`), the reads of the chain every
Permit2 verification makes, and which schemes a chain has the contracts for (`permit2_schemes`: what
`/supported` lists, and what the merchant's `check` asks of the chain its in-process facilitator settles on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ._claims import ClaimKey
from ._gas import is_contract
from ._permit2 import EXACT_PERMIT2_PROXY, PERMIT2_ADDRESS, UPTO_PERMIT2_PROXY
from ._permit2_calls import encode_allowance, encode_nonce_bitmap
from ._request import Permit2Request
from ._rpc import RpcCall, RpcClient
from ._token import encode_balance_of

__all__ = [
    "HEAD_BLOCK",
    "PROXIES",
    "READS",
    "VerifiedPermit2",
    "permit2_claim_key",
    "permit2_reads",
    "permit2_schemes",
]

PROXIES: Final = {"exact": EXACT_PERMIT2_PROXY, "upto": UPTO_PERMIT2_PROXY}
"""The x402 proxy each scheme settles through."""
HEAD_BLOCK: Final = RpcCall("eth_getBlockByNumber", ["latest", False])
READS: Final = 7
"""How many replies `permit2_reads` asks for."""


@dataclass(frozen=True, slots=True)
class VerifiedPermit2:
    """A Permit2 payment that passed every check, with what its settlement sends.

    `target` is the scheme's proxy, or Multicall3 when an ERC-6492 wallet is deployed in the same
    transaction; `sender` the one relayer key that may send it (an `upto` witness's facilitator), None
    when any may. `amount` is what it moves; `with_eip2612` says it relays the payer's EIP-2612 permit.
    `code_hash` is the keccak-256 of the payer's code, for a wallet that has code.
    """

    scheme: str
    payer: str
    asset: str
    nonce: int
    deadline: int
    amount: int
    target: str
    calldata: str
    gas_estimate: int
    sender: str | None
    with_eip2612: bool = False
    code_hash: str | None = None

    def claim_key(self, chain_id: int) -> ClaimKey:
        """The claim key of this payment on `chain_id` (`permit2_claim_key`)."""
        return permit2_claim_key(chain_id, self.payer, self.nonce)


def permit2_claim_key(chain_id: int, payer: str, nonce: int) -> ClaimKey:
    """The claim key of `payer`'s Permit2 `nonce` on `chain_id`: Permit2's nonces are the owner's across
    every token, so the key names Permit2, not the token."""
    return ClaimKey(chain_id, PERMIT2_ADDRESS, payer, f"0x{nonce:064x}")


def permit2_reads(request: Permit2Request) -> list[RpcCall]:
    """The reads every Permit2 payment needs (`READS` of them): the codes of Permit2, the scheme's proxy, the
    token and the payer; the payer's balance and allowance to Permit2; Permit2's bitmap word of the nonce."""
    auth, asset = request.payment.payload.permit2_authorization, request.terms.asset
    payer = auth.from_address

    def read(to: str, data: str) -> RpcCall:
        return RpcCall("eth_call", [{"to": to, "data": data}, "latest"])

    return [
        *(
            RpcCall("eth_getCode", [address, "latest"])
            for address in (PERMIT2_ADDRESS, PROXIES[request.terms.scheme], asset, payer)
        ),
        read(asset, encode_balance_of(payer)),
        read(asset, encode_allowance(payer)),
        read(PERMIT2_ADDRESS, encode_nonce_bitmap(payer, auth.nonce)),
    ]


async def permit2_schemes(rpc: RpcClient) -> frozenset[str]:
    """The schemes the chain `rpc` reads can settle by Permit2: those whose x402 proxy has code, Permit2 too
    (one batch).

    Raises:
        ChainError: the node could not be read.
    """
    permit2, *proxies = await rpc.batch(
        [RpcCall("eth_getCode", [address, "latest"]) for address in (PERMIT2_ADDRESS, *PROXIES.values())]
    )
    return frozenset(
        scheme
        for scheme, code in zip(PROXIES, proxies, strict=True)
        if is_contract(permit2) and is_contract(code)
    )
