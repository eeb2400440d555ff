"""Whether Permit2 may move the payer's token, and if not, the x402 `eip2612GasSponsoring` extension that
lets it within the payment itself, so the payer never pays gas.

Permit2 moves a token only within the allowance its owner gave it (`allowance(owner, Permit2)`). When that is
short of the permitted amount and the token has EIP-2612 (it answers `nonces(owner)` and
`DOMAIN_SEPARATOR()`), the payer signs the token's `Permit` of Permit2 for exactly the permitted amount
(what the x402 proxies require) with the Permit2 transfer's deadline, and the facilitator relays it in the
settlement transaction. The token's EIP-712 name and version come from the terms' `extra`, else the card,
else the token's `name()` with version "1", and are used only when they give the token's own
`DOMAIN_SEPARATOR()`: a permit under another domain would be refused on chain. Without EIP-2612 the payment
is refused: the payer must approve Permit2 once (`x402-pay approve-permit2`). Whether a payment may count
on the allowance it read, or sign a permit now, is `_allowance_leases`' to say: payments in flight share it.
"""

from __future__ import annotations

from typing import Any, Final

from eth_abi.abi import decode
from eth_abi.exceptions import DecodingError
from eth_account import Account
from eth_utils.crypto import keccak

from a2a_x402.facilitator.wire import EIP2612_GAS_SPONSORING, PaymentRequirements

from ._card import CardAsset
from ._chain import Chain, call_data
from ._errors import ChainError, Permit2NotApprovedError
from ._permit2_terms import PERMIT2_ADDRESS

__all__ = ["permit2_allowance", "permit2_extensions"]


_DOMAIN_TYPEHASH: Final = keccak(
    text="EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
_PERMIT_TYPES: Final = {
    "Permit": [
        {"name": "owner", "type": "address"},
        {"name": "spender", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"},
    ]
}
# The extension's own version (of its `info` shape), not the token's.
_EXTENSION_VERSION: Final = "1"


async def permit2_allowance(chain: Chain, owner: str, token: str) -> int:
    """What Permit2 may move of `owner`'s `token` (`allowance(owner, Permit2)`).

    Raises:
        ChainError: the node could not tell, or the token does not answer `allowance`.
    """
    allowance = await chain.uint(
        token, "allowance(address,address)", ["address", "address"], [owner, PERMIT2_ADDRESS]
    )
    if allowance is None:
        raise ChainError(f"{token} on {chain.network} does not answer allowance(): is it an ERC-20?")
    return allowance


async def permit2_extensions(
    chain: Chain,
    private_key: str,
    requirements: PaymentRequirements,
    *,
    card_asset: CardAsset | None,
    deadline: int,
    allowance: int,
) -> dict[str, Any]:
    """The extensions carrying an EIP-2612 permit of Permit2 for `requirements.amount`, valid until
    `deadline`, for a payer whose `allowance` (as read) is short of it.

    Raises:
        Permit2NotApprovedError: the token cannot grant the allowance by signature.
        ChainError: the node could not tell.
    """
    owner = Account.from_key(private_key).address
    token, amount = requirements.asset, requirements.amount
    refusal = (
        f"Permit2 may move {allowance} of {amount} atomic units of {token} from {owner} on {chain.network}, "
        "and the token has no EIP-2612 permit to allow it in the payment: approve Permit2 once "
        f"(x402-pay approve-permit2 --asset {token})"
    )
    nonce = await chain.uint(token, "nonces(address)", ["address"], [owner])
    separator = await _domain_separator(chain, token)
    if nonce is None or separator is None:
        raise Permit2NotApprovedError(refusal)
    domain = await _matching_domain(chain, requirements, card_asset, separator)
    if domain is None:
        raise Permit2NotApprovedError(
            f"{refusal}; its EIP-712 domain matches neither the terms' nor the card's"
        )
    name, version = domain
    message = {
        "owner": owner,
        "spender": PERMIT2_ADDRESS,
        "value": amount,
        "nonce": nonce,
        "deadline": deadline,
    }
    typed_domain = {"name": name, "version": version, "chainId": chain.chain_id, "verifyingContract": token}
    signed = Account.sign_typed_data(private_key, typed_domain, _PERMIT_TYPES, message)
    info = {
        "from": owner,
        "asset": token,
        "spender": PERMIT2_ADDRESS,
        "amount": str(amount),
        "nonce": str(nonce),
        "deadline": str(deadline),
        "signature": "0x" + signed.signature.hex(),
        "version": _EXTENSION_VERSION,
    }
    return {EIP2612_GAS_SPONSORING: {"info": info}}


async def _domain_separator(chain: Chain, token: str) -> bytes | None:
    try:
        returned = await chain.call(token, call_data("DOMAIN_SEPARATOR()"))
    except ChainError as exc:
        if exc.reverted:
            return None
        raise
    return returned if len(returned) == 32 else None


async def _matching_domain(
    chain: Chain, requirements: PaymentRequirements, card_asset: CardAsset | None, separator: bytes
) -> tuple[str, str] | None:
    """The first (name, version) whose EIP-712 domain is the token's `separator`."""
    extra = requirements.extra or {}
    candidates: list[tuple[object, object]] = [(extra.get("name"), extra.get("version"))]
    if card_asset is not None:
        candidates.append((card_asset.name, card_asset.version))
    for name, version in candidates:
        if isinstance(name, str) and isinstance(version, str):
            if _separator(name, version, chain.chain_id, requirements.asset) == separator:
                return name, version
    on_chain = await _token_name(chain, requirements.asset)
    if on_chain is not None and _separator(on_chain, "1", chain.chain_id, requirements.asset) == separator:
        return on_chain, "1"
    return None


async def _token_name(chain: Chain, token: str) -> str | None:
    try:
        returned = await chain.call(token, call_data("name()"))
        (name,) = decode(["string"], returned)
    except ChainError as exc:
        if exc.reverted:
            return None
        raise
    except (DecodingError, UnicodeDecodeError):  # data that is no ABI string: no name to try
        return None
    return str(name)


def _separator(name: str, version: str, chain_id: int, token: str) -> bytes:
    return keccak(
        _DOMAIN_TYPEHASH
        + keccak(text=name)
        + keccak(text=version)
        + chain_id.to_bytes(32, "big")
        + bytes(12)
        + bytes.fromhex(token[2:])
    )
