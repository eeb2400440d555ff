"""Permit2 payments for the tests: signed by the x402 Python SDK's own clients, or by eth-account for the
cases no SDK client would sign (another spender, a witness of another recipient, a window in the past).

No chain is needed: the signatures are the payer's, and the checks under test are the ones made without it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from eth_account import Account
from x402 import x402ClientSync
from x402.mechanisms.evm import EthAccountSigner
from x402.mechanisms.evm.constants import PERMIT2_WITNESS_TYPES, UPTO_PERMIT2_WITNESS_TYPES
from x402.mechanisms.evm.exact.client import ExactEvmScheme
from x402.mechanisms.evm.upto.client import UptoEvmScheme
from x402.schemas import PaymentRequired, PaymentRequirements, ResourceInfo

from a2a_x402.devchain import ANVIL_DEV_KEYS

__all__ = [
    "AMOUNT",
    "ASSET",
    "CHAIN_ID",
    "FACILITATOR",
    "NETWORK",
    "PAYER_KEY",
    "PAY_TO",
    "STRANGER_KEY",
    "requirements",
    "resign",
    "sdk_payment",
]

# anvil's well-known dev key: no funds are at stake, nothing here touches a chain.
PAYER_KEY = ANVIL_DEV_KEYS[1]
# Someone who signs but is neither the payer nor any dev account: a key made for this run.
STRANGER_KEY = Account.create().key.to_0x_hex()
CHAIN_ID = 31337
NETWORK = f"eip155:{CHAIN_ID}"
ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"
FACILITATOR = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
AMOUNT = 1_500_000


def requirements(scheme: str = "exact", /, **changes: Any) -> dict[str, Any]:
    """Wire requirements for `AMOUNT` of `ASSET` to `PAY_TO` by Permit2 (`upto` names `FACILITATOR`)."""
    extra: dict[str, Any] = {"name": "USDC", "version": "2", "assetTransferMethod": "permit2"}
    if scheme == "upto":
        extra["facilitatorAddress"] = FACILITATOR
    document = {
        "scheme": scheme,
        "network": NETWORK,
        "asset": ASSET,
        "amount": str(AMOUNT),
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 120,
        "extra": extra,
    }
    document.update(changes)
    return document


def sdk_payment(wire_requirements: dict[str, Any], key: str = PAYER_KEY) -> dict[str, Any]:
    """The payment payload the SDK's x402 client signs with `key` for `wire_requirements`, as it sends it."""
    signer = EthAccountSigner(Account.from_key(key))
    client = x402ClientSync()
    client.register(NETWORK, ExactEvmScheme(signer))
    client.register(NETWORK, UptoEvmScheme(signer))
    # The SDK's spend controls only know the real USDC deployments, not a test token.
    client.set_spend_controls(False)
    offer = PaymentRequirements.model_validate(wire_requirements)
    required = PaymentRequired(
        x402_version=2, resource=ResourceInfo(url="https://merchant.test/"), accepts=[offer]
    )
    dumped: dict[str, Any] = client.create_payment_payload(required).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return dumped


def resign(
    payment: dict[str, Any],
    changes: Mapping[str, object] | None = None,
    *,
    key: str = PAYER_KEY,
    chain_id: int = CHAIN_ID,
) -> dict[str, Any]:
    """A copy of `payment` whose authorization has `changes` made (dotted names: `witness.to`), signed by
    `key` for `chain_id` with eth-account's own EIP-712 encoder and the SDK's type definitions."""
    result = copy.deepcopy(payment)
    authorization = result["payload"]["permit2Authorization"]
    for path, value in (changes or {}).items():
        *parents, last = path.split(".")
        target = authorization
        for name in parents:
            target = target[name]
        target[last] = value
    upto = "facilitator" in authorization["witness"]
    witness_types = UPTO_PERMIT2_WITNESS_TYPES if upto else PERMIT2_WITNESS_TYPES
    witness = {
        name: authorization["witness"][name] if kind == "address" else int(authorization["witness"][name])
        for name, kind in ((f["name"], f["type"]) for f in witness_types["Witness"])
    }
    message = {
        "permitted": {
            "token": authorization["permitted"]["token"],
            "amount": int(authorization["permitted"]["amount"]),
        },
        "spender": authorization["spender"],
        "nonce": int(authorization["nonce"]),
        "deadline": int(authorization["deadline"]),
        "witness": witness,
    }
    typed = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            **witness_types,
        },
        "primaryType": "PermitWitnessTransferFrom",
        "domain": {
            "name": "Permit2",
            "chainId": chain_id,
            "verifyingContract": "0x000000000022D473030F116dDEE9F6B43aC78BA3",
        },
        "message": message,
    }
    signed = Account.sign_typed_data(key, full_message=typed)
    result["payload"]["signature"] = "0x" + signed.signature.hex().removeprefix("0x")
    return result
