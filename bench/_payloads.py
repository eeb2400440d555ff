"""Pre-signed work for the benchmark: facilitator request bodies and raw relayer transactions.

Everything is signed before the clock starts, so a segment measures the server and not the payer. Every
authorization is fresh (random EIP-3009 nonce) and used in one segment only. Authorizations come from
several payers in turn; EIP-3009 nonces are not sequential, so the number of payers does not matter to
the token, only to realism. A `Batch` holds one kind's signed payments in every form a segment sends
them: ``/verify`` and ``/settle`` bodies, and the relayer call that settles each straight on the node.
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

__all__ = [
    "EIP3009_KIND",
    "Batch",
    "RawTransaction",
    "eip3009_batch",
    "facilitator_body",
    "make_requirements",
    "sign_payloads",
    "sign_raw_calls",
    "sign_raw_transfers",
    "to_requests",
]

AMOUNT_ATOMIC = 1_000  # 0.001 dev USDC per payment
EIP3009_KIND = "exact, EIP-3009"
"""The settlement kind of `eip3009_batch`, the benchmark's first (issue 15's targets are judged on it)."""
# Long enough for a full run (payloads are signed right before their segment), short of any default cap.
_VALIDITY_S = 600
# A transferWithAuthorization uses about 86k, a Permit2 proxy's settle up to 106k (its first one, cold).
_RAW_GAS = 150_000
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
    wire = requirements.to_json_dict()
    return [
        build_request(host, port, "POST", path, facilitator_body(p.to_json_dict(), wire)) for p in payloads
    ]


@dataclass(frozen=True, slots=True)
class Batch:
    """Pre-signed payments of one kind, in every form a segment sends them."""

    kind: str
    asset: str
    """The token the payments move."""
    charged: int
    """What one settlement moves to the payee, in atomic units (an `upto` payment: what its work used)."""
    verify_bodies: tuple[bytes, ...]
    """The facilitator API's JSON body for ``POST /verify`` of each payment."""
    settle_bodies: tuple[bytes, ...]
    """The same for ``POST /settle`` (an `upto` payment's requirements name the amount charged)."""
    calls: tuple[tuple[str, bytes], ...]
    """(to, calldata) of the relayer transaction that settles each payment, for the node's ceiling."""

    def __len__(self) -> int:
        return len(self.settle_bodies)

    def requests(self, host: str, port: int, mode: str) -> list[bytes]:
        """The HTTP request bytes of ``POST /verify`` or ``POST /settle`` (`mode`) for every payment."""
        bodies = self.verify_bodies if mode == "verify" else self.settle_bodies
        return [build_request(host, port, "POST", f"/{mode}", body) for body in bodies]


def facilitator_body(payload: dict[str, Any], requirements: dict[str, Any]) -> bytes:
    """The facilitator API's JSON body of `payload` judged against `requirements` (both wire form)."""
    return orjson.dumps({"x402Version": 2, "paymentPayload": payload, "paymentRequirements": requirements})


def eip3009_batch(
    chain: DevChain, payloads: Sequence[PaymentPayload], requirements: PaymentRequirements
) -> Batch:
    """`payloads` (signed for `requirements`) as a batch: each settles with the token's bytes-signature
    ``transferWithAuthorization`` overload on the node."""
    wire = requirements.to_json_dict()
    bodies = tuple(facilitator_body(p.to_json_dict(), wire) for p in payloads)
    calls = tuple((chain.asset, _transfer_call(p)) for p in payloads)
    return Batch(EIP3009_KIND, chain.asset, requirements.amount, bodies, bodies, calls)


@dataclass(frozen=True, slots=True)
class RawTransaction:
    """A signed relayer transaction carrying one authorization."""

    raw: str
    tx_hash: str


def _transfer_call(payload: PaymentPayload) -> bytes:
    auth = payload.payload.authorization
    return encode_call(
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


def sign_raw_calls(
    chain: DevChain, calls: Sequence[tuple[str, bytes]], *, first_nonce: int, base_fee_wei: int
) -> list[RawTransaction]:
    """Relayer transactions making `calls` ((to, calldata) each).

    Nonces are consecutive from `first_nonce`; the gas limit is fixed, so nothing needs the node.
    """
    relayer = Account.from_key(chain.relayer_key)
    signed: list[RawTransaction] = []
    for offset, (to, data) in enumerate(calls):
        transaction: dict[str, Any] = {
            "type": 2,
            "chainId": chain.chain_id,
            "nonce": first_nonce + offset,
            "to": to,
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


def sign_raw_transfers(
    chain: DevChain, payloads: Sequence[PaymentPayload], *, first_nonce: int, base_fee_wei: int
) -> list[RawTransaction]:
    """Relayer transactions calling the token's bytes-signature ``transferWithAuthorization`` overload
    for each of `payloads`, nonces consecutive from `first_nonce`."""
    calls = [(chain.asset, _transfer_call(p)) for p in payloads]
    return sign_raw_calls(chain, calls, first_nonce=first_nonce, base_fee_wei=base_fee_wei)
