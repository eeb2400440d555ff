"""Pre-signed work for the benchmark: facilitator request bodies and raw relayer transactions.

Everything is signed before the clock starts, so a segment measures the server and not the payer. Every
authorization is fresh (random EIP-3009 nonce) and used in one segment only. Authorizations come from
several payers in turn; EIP-3009 nonces are not sequential, so the number of payers does not matter to
the token, only to realism.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from eth_account import Account

from a2a_x402.devchain import DevChain, encode_call
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from a2a_x402.payer import sign_payment

from ._http import build_request

__all__ = ["RawTransaction", "make_requirements", "sign_payloads", "sign_raw_transfers", "to_requests"]

AMOUNT_ATOMIC = 1_000  # 0.001 dev USDC per payment
# Long enough for a full run (payloads are signed right before their segment), short of any default cap.
_VALIDITY_S = 600
_RAW_GAS = 150_000  # a transferWithAuthorization uses about 86k
_RAW_TIP_WEI = 1_000_000_000
_TRANSFER_WITH_AUTHORIZATION = (
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
)


def make_requirements(chain: DevChain, pay_to: str) -> PaymentRequirements:
    """x402 v2 `exact` requirements for AMOUNT_ATOMIC of the dev token to `pay_to`."""
    return PaymentRequirements(
        scheme="exact",
        network=chain.network,
        asset=chain.asset,
        amount=AMOUNT_ATOMIC,
        pay_to=pay_to,
        max_timeout_seconds=_VALIDITY_S,
        extra={"name": chain.asset_name, "version": chain.asset_version},
    )


def sign_payloads(
    payer_keys: Sequence[str], requirements: PaymentRequirements, count: int
) -> list[PaymentPayload]:
    """`count` fresh authorizations for `requirements`, signed by the payers in turn."""
    return [sign_payment(payer_keys[i % len(payer_keys)], requirements) for i in range(count)]


def to_requests(
    host: str, port: int, path: str, payloads: Sequence[PaymentPayload], requirements: PaymentRequirements
) -> list[bytes]:
    """The HTTP request bytes of ``POST path`` with a facilitator API body for each payload."""
    wire_requirements = requirements.to_json_dict()
    return [
        build_request(
            host,
            port,
            "POST",
            path,
            orjson.dumps(
                {
                    "x402Version": 2,
                    "paymentPayload": p.to_json_dict(),
                    "paymentRequirements": wire_requirements,
                }
            ),
        )
        for p in payloads
    ]


@dataclass(frozen=True, slots=True)
class RawTransaction:
    """A signed relayer transaction carrying one authorization."""

    raw: str
    tx_hash: str


def sign_raw_transfers(
    chain: DevChain, payloads: Sequence[PaymentPayload], *, first_nonce: int, base_fee_wei: int
) -> list[RawTransaction]:
    """Relayer transactions calling the token's bytes-signature ``transferWithAuthorization`` overload.

    Nonces are consecutive from `first_nonce`; the gas limit is fixed, so nothing needs the node.
    """
    relayer = Account.from_key(chain.relayer_key)
    signed: list[RawTransaction] = []
    for offset, payload in enumerate(payloads):
        auth = payload.payload.authorization
        data = encode_call(
            _TRANSFER_WITH_AUTHORIZATION,
            [
                auth.from_address,
                auth.to,
                auth.value,
                auth.valid_after,
                auth.valid_before,
                bytes.fromhex(auth.nonce[2:]),
                bytes.fromhex(payload.payload.signature[2:]),
            ],
        )
        transaction: dict[str, Any] = {
            "type": 2,
            "chainId": chain.chain_id,
            "nonce": first_nonce + offset,
            "to": chain.asset,
            "data": data,
            "gas": _RAW_GAS,
            # Twice the base fee: the base fee only falls while blocks carry one small transaction each.
            "maxFeePerGas": 2 * base_fee_wei + _RAW_TIP_WEI,
            "maxPriorityFeePerGas": _RAW_TIP_WEI,
            "value": 0,
        }
        tx = relayer.sign_transaction(transaction)
        signed.append(RawTransaction(raw="0x" + tx.raw_transaction.hex(), tx_hash="0x" + tx.hash.hex()))
    return signed
