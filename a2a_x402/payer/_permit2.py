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
    Permit2TokenPermissions,
    UptoPaymentPayload,
    UptoPermit2Authorization,
    UptoPermit2Payload,
    UptoPermit2Witness,
)

from ._permit2_terms import (
    EXACT_PERMIT2_PROXY_ADDRESS,
    PERMIT2_ADDRESS,
    UPTO_PERMIT2_PROXY_ADDRESS,
    is_permit2,
    upto_facilitator,
)
from ._signing import VALID_AFTER_BACKDATE_S

__all__ = ["Permit2Payment", "sign_permit2_payment"]

Permit2Payment: TypeAlias = ExactPermit2PaymentPayload | UptoPaymentPayload
"""A signed Permit2 payment of either scheme."""

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
