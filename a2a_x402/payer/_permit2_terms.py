"""What Permit2 terms say, read without signing anything: the canonical addresses, whether terms are paid by
Permit2, and the facilitator an `upto` payment may name (see `_permit2` for why so little is checked of it).
Kept apart from the signing so that the policy (and the CLI that builds one) imports no signing library.
"""

from __future__ import annotations

from typing import Final

from a2a_x402.facilitator.wire import PaymentRequirements, Permit2Extra, WireError

__all__ = [
    "EXACT_PERMIT2_PROXY_ADDRESS",
    "PERMIT2_ADDRESS",
    "UPTO_PERMIT2_PROXY_ADDRESS",
    "is_permit2",
    "upto_facilitator",
]

# Deployed with CREATE2 at the same address on every chain (tests pin them to the dev chain's).
PERMIT2_ADDRESS: Final = "0x000000000022D473030F116dDEE9F6B43aC78BA3"
EXACT_PERMIT2_PROXY_ADDRESS: Final = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
UPTO_PERMIT2_PROXY_ADDRESS: Final = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002"

_ZERO_ADDRESS: Final = "0x" + "0" * 40
_NOT_A_FACILITATOR: Final = frozenset(
    a.lower()
    for a in (_ZERO_ADDRESS, PERMIT2_ADDRESS, EXACT_PERMIT2_PROXY_ADDRESS, UPTO_PERMIT2_PROXY_ADDRESS)
)
_PERMIT2_METHOD: Final = "permit2"
_EIP3009_METHOD: Final = "eip3009"


def is_permit2(requirements: PaymentRequirements) -> bool:
    """Whether `requirements` are paid by a Permit2 witness transfer (`upto`, or `exact` by Permit2).

    Raises:
        ValueError: `extra.assetTransferMethod` names a method the payer does not know.
    """
    if requirements.scheme == "upto":
        return True
    method = _extra(requirements).asset_transfer_method
    if method not in (None, _PERMIT2_METHOD, _EIP3009_METHOD):
        raise ValueError(f"extra.assetTransferMethod {method!r} is not one the payer signs")
    return method == _PERMIT2_METHOD


def upto_facilitator(requirements: PaymentRequirements) -> str:
    """The checksummed `extra.facilitatorAddress` of `upto` terms, once it may be named as the witness's.

    Raises:
        ValueError: it is missing, malformed, or one of the payment's own contracts.
    """
    facilitator = _extra(requirements).facilitator_address
    if facilitator is None:
        raise ValueError("the upto terms name no facilitator (extra.facilitatorAddress)")
    if facilitator.lower() in _NOT_A_FACILITATOR | {requirements.asset.lower()}:
        raise ValueError(
            f"extra.facilitatorAddress {facilitator} is the zero address or a contract of the payment, "
            "which can never settle it"
        )
    return facilitator


def _extra(requirements: PaymentRequirements) -> Permit2Extra:
    try:
        return Permit2Extra.of(requirements)
    except WireError as exc:
        raise ValueError(f"the terms' {exc}") from None
