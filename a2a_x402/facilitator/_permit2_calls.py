"""ABI of the calls a Permit2 payment needs: the x402 proxies' `settle` and `settleWithPermit`, the token's
`allowance`, Permit2's `nonceBitmap`; and the names of the custom errors they revert with.

Encoded with eth-abi: the proxies take nested tuples and a dynamic `bytes`, which hand-encoding would only
make harder to check. A test compares the bytes with the x402 SDK's own ABIs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from eth_abi.abi import encode
from eth_utils.crypto import keccak

from ._permit2 import PERMIT2_ADDRESS, Permit2Authorization
from ._token import address_word, uint_word
from .wire import UptoPermit2Authorization

__all__ = [
    "Eip2612Approval",
    "encode_allowance",
    "encode_nonce_bitmap",
    "encode_settle",
    "revert_error_name",
]

_PERMIT = "((address,uint256),uint256,uint256)"
_EIP2612_PERMIT = "(uint256,uint256,bytes32,bytes32,uint8)"
_EXACT_WITNESS = "(address,uint256)"
_UPTO_WITNESS = "(address,address,uint256)"
# The argument types of each proxy's `settle`; `settleWithPermit` puts the EIP-2612 permit first.
_EXACT_SETTLE: Final = [_PERMIT, "address", _EXACT_WITNESS, "bytes"]
_UPTO_SETTLE: Final = [_PERMIT, "uint256", "address", _UPTO_WITNESS, "bytes"]


def _selector(name: str, types: list[str]) -> bytes:
    return keccak(text=f"{name}({','.join(types)})")[:4]


_SELECTORS: Final = {
    (upto, with_permit): _selector(
        "settleWithPermit" if with_permit else "settle",
        ([_EIP2612_PERMIT] if with_permit else []) + (_UPTO_SETTLE if upto else _EXACT_SETTLE),
    )
    for upto in (False, True)
    for with_permit in (False, True)
}
_ALLOWANCE: Final = _selector("allowance", ["address", "address"])
_NONCE_BITMAP: Final = _selector("nonceBitmap", ["address", "uint256"])

# The custom errors of Permit2 and of the two proxies, by selector (Permit2's InvalidAmount takes the
# permitted maximum, the proxies' takes nothing: two selectors, one name).
_ERRORS: Final = {
    _selector(name, types): name
    for name, types in (
        ("InvalidAmount", ["uint256"]),
        ("SignatureExpired", ["uint256"]),
        ("InvalidNonce", []),
        ("InvalidSignatureLength", []),
        ("InvalidSignature", []),
        ("InvalidSigner", []),
        ("InvalidContractSignature", []),
        ("InvalidPermit2Address", []),
        ("InvalidDestination", []),
        ("PaymentTooEarly", []),
        ("InvalidOwner", []),
        ("InvalidAmount", []),
        ("Permit2612AmountMismatch", []),
        ("UnauthorizedFacilitator", []),
        ("AmountExceedsPermitted", []),
        ("ReentrancyGuardReentrantCall", []),
    )
}


@dataclass(frozen=True, slots=True)
class Eip2612Approval:
    """A payer's EIP-2612 `permit` of Permit2, as a proxy's `settleWithPermit` takes it."""

    value: int
    deadline: int
    signature: bytes
    """65 bytes r‖s‖v."""


def encode_settle(
    authorization: Permit2Authorization,
    amount: int,
    signature: bytes,
    approval: Eip2612Approval | None = None,
) -> str:
    """Calldata for the scheme's proxy: `settle`, or `settleWithPermit` with `approval`.

    `amount` is what an `upto` settlement moves (an `exact` one always moves the whole permitted amount);
    `signature` is the one Permit2 is to check (an ERC-6492 wrapper's inner signature).
    """
    permitted = authorization.permitted
    permit = ((permitted.token, permitted.amount), authorization.nonce, authorization.deadline)
    owner = authorization.from_address
    upto = isinstance(authorization, UptoPermit2Authorization)
    args: list[object]
    if isinstance(authorization, UptoPermit2Authorization):
        witness = authorization.witness
        types = _UPTO_SETTLE
        args = [permit, amount, owner, (witness.to, witness.facilitator, witness.valid_after), signature]
    else:
        types = _EXACT_SETTLE
        args = [permit, owner, (authorization.witness.to, authorization.witness.valid_after), signature]
    if approval is not None:
        raw = approval.signature
        types = [_EIP2612_PERMIT, *types]
        args = [(approval.value, approval.deadline, raw[:32], raw[32:64], raw[64]), *args]
    return "0x" + (_SELECTORS[upto, approval is not None] + encode(types, args)).hex()


def encode_allowance(owner: str, spender: str = PERMIT2_ADDRESS) -> str:
    """Calldata for ERC-20 `allowance(owner, spender)` (Permit2 by default)."""
    return "0x" + (_ALLOWANCE + address_word(owner) + address_word(spender)).hex()


def encode_nonce_bitmap(owner: str, nonce: int) -> str:
    """Calldata for Permit2's `nonceBitmap(owner, wordPos)`, the word holding `nonce`'s bit."""
    return "0x" + (_NONCE_BITMAP + address_word(owner) + uint_word(nonce >> 8)).hex()


def revert_error_name(data: object) -> str | None:
    """The name of the Permit2 or proxy custom error that revert `data` (0x hex) carries, if it is one."""
    if not isinstance(data, str) or len(data) < 10:
        return None
    try:
        return _ERRORS.get(bytes.fromhex(data[2:10]))
    except ValueError:
        return None
