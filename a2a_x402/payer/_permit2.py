"""Signing Permit2 witness transfers: x402 `exact` by Permit2 and `upto`.

The payer signs Permit2's `PermitWitnessTransferFrom` under Permit2's own EIP-712 domain (name, chain id and
verifying contract; no version). The spender is never read from the terms: it is the x402 proxy of the
scheme at its canonical address, the only contract Permit2 lets move the funds, and it checks the witness:
the recipient (`to`, the terms' payTo), the earliest moment (`validAfter`) and, for `upto`, the one address
allowed to settle and so to choose the amount (`facilitator`, the terms' `extra.facilitatorAddress`).

What an `upto` payer can check of that facilitator is little: any address may relay a settlement, so it
cannot be pinned the way payTo is. It can only be a well-formed address that is none of the contracts of
the payment itself (zero, Permit2, a proxy, the token): whoever it names can move at most the permitted
maximum, and only to the pinned payTo, which is what the policy's caps bound.
"""

from __future__ import annotations

import os
import time
from typing import Any, Final, TypeAlias

from eth_account import Account

from a2a_x402.facilitator.wire import (
    ExactPermit2Authorization,
    ExactPermit2Payload,
    ExactPermit2PaymentPayload,
    ExactPermit2Witness,
    PaymentRequirements,
    Permit2Extra,
    Permit2TokenPermissions,
    UptoPaymentPayload,
    UptoPermit2Authorization,
    UptoPermit2Payload,
    UptoPermit2Witness,
    WireError,
)

from ._signing import VALID_AFTER_BACKDATE_S

__all__ = [
    "EXACT_PERMIT2_PROXY_ADDRESS",
    "PERMIT2_ADDRESS",
    "UPTO_PERMIT2_PROXY_ADDRESS",
    "Permit2Payment",
    "is_permit2",
    "sign_permit2_payment",
    "upto_facilitator",
]

# Deployed with CREATE2 at the same address on every chain (tests pin them to the dev chain's).
PERMIT2_ADDRESS: Final = "0x000000000022D473030F116dDEE9F6B43aC78BA3"
EXACT_PERMIT2_PROXY_ADDRESS: Final = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
UPTO_PERMIT2_PROXY_ADDRESS: Final = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002"

Permit2Payment: TypeAlias = ExactPermit2PaymentPayload | UptoPaymentPayload
"""A signed Permit2 payment of either scheme."""

_ZERO_ADDRESS: Final = "0x" + "0" * 40
_NOT_A_FACILITATOR: Final = frozenset(
    a.lower()
    for a in (_ZERO_ADDRESS, PERMIT2_ADDRESS, EXACT_PERMIT2_PROXY_ADDRESS, UPTO_PERMIT2_PROXY_ADDRESS)
)
_PERMIT2_METHOD: Final = "permit2"
_EIP3009_METHOD: Final = "eip3009"

_TOKEN_PERMISSIONS: Final = [
    {"name": "token", "type": "address"},
    {"name": "amount", "type": "uint256"},
]
_PERMIT: Final = [
    {"name": "permitted", "type": "TokenPermissions"},
    {"name": "spender", "type": "address"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
    {"name": "witness", "type": "Witness"},
]
_EXACT_WITNESS: Final = [
    {"name": "to", "type": "address"},
    {"name": "validAfter", "type": "uint256"},
]
_UPTO_WITNESS: Final = [
    {"name": "to", "type": "address"},
    {"name": "facilitator", "type": "address"},
    {"name": "validAfter", "type": "uint256"},
]


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


def sign_permit2_payment(
    private_key: str,
    requirements: PaymentRequirements,
    *,
    nonce: int | None = None,
    deadline: int | None = None,
    valid_after: int | None = None,
    extensions: dict[str, Any] | None = None,
) -> Permit2Payment:
    """Sign a Permit2 witness transfer paying `requirements` (`upto`: at most its amount) and return the x402
    v2 payload, with `extensions` (e.g. `eip2612GasSponsoring`) beside it.

    The nonce is a random uint256 (Permit2 nonces are an unordered bitmap: any unused one will do); the
    transfer is valid from `VALID_AFTER_BACKDATE_S` ago (as the EIP-3009 authorization) until
    `maxTimeoutSeconds` from now.

    Raises:
        ValueError: the requirements are not Permit2 ones, or an `upto` one names no usable facilitator.
    """
    if not is_permit2(requirements):
        raise ValueError("the requirements are not paid by Permit2 (scheme upto, or exact by permit2)")
    upto = requirements.scheme == "upto"
    facilitator = upto_facilitator(requirements) if upto else None
    account = Account.from_key(private_key)
    now = int(time.time())
    permitted = Permit2TokenPermissions(token=requirements.asset, amount=requirements.amount)
    spender = UPTO_PERMIT2_PROXY_ADDRESS if upto else EXACT_PERMIT2_PROXY_ADDRESS
    fields: dict[str, Any] = {
        "from": account.address,
        "permitted": permitted,
        "spender": spender,
        "nonce": int.from_bytes(os.urandom(32), "big") if nonce is None else nonce,
        "deadline": now + requirements.max_timeout_seconds if deadline is None else deadline,
    }
    after = max(now - VALID_AFTER_BACKDATE_S, 0) if valid_after is None else valid_after
    authorization: ExactPermit2Authorization | UptoPermit2Authorization
    if facilitator is not None:
        witness: dict[str, Any] = {"to": requirements.pay_to, "facilitator": facilitator, "validAfter": after}
        authorization = UptoPermit2Authorization(
            **fields,
            witness=UptoPermit2Witness(to=requirements.pay_to, facilitator=facilitator, valid_after=after),
        )
    else:
        witness = {"to": requirements.pay_to, "validAfter": after}
        authorization = ExactPermit2Authorization(
            **fields, witness=ExactPermit2Witness(to=requirements.pay_to, valid_after=after)
        )
    message = {
        "permitted": {"token": permitted.token, "amount": permitted.amount},
        "spender": spender,
        "nonce": authorization.nonce,
        "deadline": authorization.deadline,
        "witness": witness,
    }
    types = {
        "PermitWitnessTransferFrom": _PERMIT,
        "TokenPermissions": _TOKEN_PERMISSIONS,
        "Witness": _UPTO_WITNESS if upto else _EXACT_WITNESS,
    }
    domain = {"name": "Permit2", "chainId": requirements.chain_id, "verifyingContract": PERMIT2_ADDRESS}
    signature = "0x" + Account.sign_typed_data(private_key, domain, types, message).signature.hex()
    if isinstance(authorization, UptoPermit2Authorization):
        return UptoPaymentPayload(
            x402_version=2,
            payload=UptoPermit2Payload(permit2_authorization=authorization, signature=signature),
            accepted=requirements,
            extensions=extensions,
        )
    return ExactPermit2PaymentPayload(
        x402_version=2,
        payload=ExactPermit2Payload(permit2_authorization=authorization, signature=signature),
        accepted=requirements,
        extensions=extensions,
    )


def _extra(requirements: PaymentRequirements) -> Permit2Extra:
    try:
        return Permit2Extra.of(requirements)
    except WireError as exc:
        raise ValueError(f"the terms' {exc}") from None
