"""Signing EIP-3009 `TransferWithAuthorization` payments for x402 `exact` requirements."""

from __future__ import annotations

import os
import time

from eth_account import Account

from a2a_x402.facilitator.wire import (
    ExactEvmAuthorization,
    ExactEvmPayload,
    PaymentPayload,
    PaymentRequirements,
)

__all__ = ["VALID_AFTER_BACKDATE_S", "sign_payment"]

VALID_AFTER_BACKDATE_S = 600
"""How far before now an authorization becomes valid: the x402 SDKs' ten minutes (`now - 600` in the
TypeScript SDK's `@x402/evm`). It covers a payer's clock running ahead, and a node that judges validity at
its last block's time (ganache, an idle chain mining on arrival) up to ten minutes after that block."""

_TYPES = {
    "TransferWithAuthorization": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "validAfter", "type": "uint256"},
        {"name": "validBefore", "type": "uint256"},
        {"name": "nonce", "type": "bytes32"},
    ]
}


def sign_payment(
    private_key: str,
    requirements: PaymentRequirements,
    *,
    valid_after: int | None = None,
    valid_before: int | None = None,
    nonce: bytes | None = None,
) -> PaymentPayload:
    """Sign an authorization that pays exactly `requirements` and return the x402 v2 payload.

    The nonce is 32 random bytes (EIP-3009 nonces are single-use per payer, not sequential); the
    authorization is valid from `VALID_AFTER_BACKDATE_S` ago until `maxTimeoutSeconds` from now.
    """
    extra = requirements.extra or {}
    if not isinstance(extra.get("name"), str) or not isinstance(extra.get("version"), str):
        raise ValueError("the requirements do not name the token's EIP-712 domain (extra.name/version)")
    account = Account.from_key(private_key)
    now = int(time.time())
    message = {
        "from": account.address,
        "to": requirements.pay_to,
        "value": requirements.amount,
        "validAfter": max(now - VALID_AFTER_BACKDATE_S, 0) if valid_after is None else valid_after,
        "validBefore": now + requirements.max_timeout_seconds if valid_before is None else valid_before,
        "nonce": nonce if nonce is not None else os.urandom(32),
    }
    domain = {
        "name": extra["name"],
        "version": extra["version"],
        "chainId": requirements.chain_id,
        "verifyingContract": requirements.asset,
    }
    signed = Account.sign_typed_data(private_key, domain, _TYPES, message)
    # `from` is a keyword, so the field is `from_address` in Python and its alias on the wire; type
    # checkers see only the alias.
    authorization = ExactEvmAuthorization(
        **{"from": account.address},
        to=requirements.pay_to,
        value=requirements.amount,
        valid_after=message["validAfter"],
        valid_before=message["validBefore"],
        nonce="0x" + message["nonce"].hex(),
    )
    return PaymentPayload(
        x402_version=2,
        payload=ExactEvmPayload(authorization=authorization, signature="0x" + signed.signature.hex()),
        accepted=requirements,
    )
