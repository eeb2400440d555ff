"""ABI of the calls a Permit2 payment needs: the x402 proxies' `settle` and `settleWithPermit` (and which
permit a mined transaction's calldata settled, directly or through Multicall3), the token's `allowance`,
Permit2's `nonceBitmap`; the proxies' events; and the names of the custom errors they revert with.

Encoded with eth-abi: the proxies take nested tuples and a dynamic `bytes`, which hand-encoding would only
make harder to check. A test compares the bytes with the x402 SDK's own ABIs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from eth_abi.abi import decode, encode
from eth_abi.exceptions import DecodingError
from eth_utils.crypto import keccak

from ._erc6492 import MULTICALL3_ADDRESS
from ._permit2 import EXACT_PERMIT2_PROXY, PERMIT2_ADDRESS, UPTO_PERMIT2_PROXY, Permit2Authorization
from ._token import address_word, uint_word
from .wire import UptoPermit2Authorization, checksum_address

__all__ = [
    "PERMIT_SETTLING_TARGETS",
    "PROXY_SETTLED_TOPICS",
    "Eip2612Approval",
    "SettledPermit",
    "encode_allowance",
    "encode_nonce_bitmap",
    "encode_settle",
    "revert_error_name",
    "settled_permits",
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
# Which proxy call each selector is: (upto, with_permit), and its argument types.
_CALLS: Final = {
    selector: (
        upto,
        with_permit,
        ([_EIP2612_PERMIT] if with_permit else []) + (_UPTO_SETTLE if upto else _EXACT_SETTLE),
    )
    for (upto, with_permit), selector in _SELECTORS.items()
}
_AGGREGATE3: Final = _selector("aggregate3", ["(address,bool,bytes)[]"])
_PROXIES: Final = frozenset((EXACT_PERMIT2_PROXY, UPTO_PERMIT2_PROXY))
PERMIT_SETTLING_TARGETS: Final = _PROXIES | {MULTICALL3_ADDRESS}
"""The addresses a transaction is sent to when `settled_permits` can find a permit in it: for any other,
its calldata need not be read."""
PROXY_SETTLED_TOPICS: Final = [
    "0x" + keccak(text=event).hex() for event in ("Settled()", "SettledWithPermit()")
]
"""The topics of the events either proxy emits once it has settled (its events carry no arguments)."""
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


@dataclass(frozen=True, slots=True)
class SettledPermit:
    """The permit a proxy's `settle` (or `settleWithPermit`) call carries: who signed, which nonce, which
    token."""

    owner: str
    nonce: int
    token: str


def settled_permits(to: str, data: str) -> list[SettledPermit]:
    """The permits a transaction to `to` with calldata `data` (0x hex) hands a proxy to settle: its own call
    of a proxy, or the proxy calls of a Multicall3 `aggregate3` (an ERC-6492 wallet deployed as it pays).
    Empty for anything else (another contract calling a proxy cannot be read from its calldata)."""
    try:
        raw = bytes.fromhex(data.removeprefix("0x"))
    except ValueError:
        return []
    if to in _PROXIES:
        found = _proxy_permit(raw)
        return [found] if found is not None else []
    if to != MULTICALL3_ADDRESS or raw[:4] != _AGGREGATE3:
        return []
    try:
        (calls,) = decode(["(address,bool,bytes)[]"], raw[4:])
    except (DecodingError, ValueError, OverflowError):
        return []
    permits = (
        _proxy_permit(bytes(calldata))
        for target, _, calldata in calls
        if checksum_address(target) in _PROXIES
    )
    return [permit for permit in permits if permit is not None]


def _proxy_permit(raw: bytes) -> SettledPermit | None:
    call = _CALLS.get(raw[:4])
    if call is None:
        return None
    upto, with_permit, types = call
    try:
        args = decode(types, raw[4:])
    except (DecodingError, ValueError, OverflowError):
        return None
    at = 1 if with_permit else 0
    ((token, _), nonce, _) = args[at]
    # `settle(permit, owner, …)`; `upto` puts the amount between them.
    owner = args[at + (2 if upto else 1)]
    return SettledPermit(owner=checksum_address(owner), nonce=int(nonce), token=checksum_address(token))


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
