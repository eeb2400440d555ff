"""Permit2 payments on the dev chain for the facilitator's tests: payers holding the plain ERC-20 or the
EIP-2612 token, payments the x402 Python SDK's own clients sign for them, contract wallets paying through
Permit2, and the bodies of `/verify`.

Payments no SDK client would sign (another facilitator in the witness, a stranger's signature) are signed
again with eth-account (`tests.facilitator.permit2_payments.resign`).
"""

from __future__ import annotations

import os
from typing import Any

from eth_account import Account
from x402.extensions.eip2612_gas_sponsoring import EIP2612_GAS_SPONSORING_KEY
from x402.mechanisms.evm import EthAccountSigner, EthAccountSignerWithRPC
from x402.mechanisms.evm.exact import ExactEvmScheme
from x402.mechanisms.evm.upto import UptoEvmScheme
from x402.schemas import PaymentRequirements as SdkRequirements

from a2a_x402.devchain import PERMIT2_ADDRESS, PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION, DevChain, encode_call
from a2a_x402.facilitator.wire import (
    PaymentRequirements,
    Permit2PaymentPayload,
    parse_permit2_payment_payload,
)
from tests.facilitator.payments import relayer_address, wrap_erc6492
from tests.facilitator.permit2_payments import resign
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO

__all__ = [
    "AMOUNT",
    "approve_from",
    "counterfactual_payment",
    "funded_payer",
    "parsed",
    "permit2_requirements",
    "sdk_sign",
    "verify_body",
    "wallet_payment",
]

AMOUNT = 1_500_000
_MAX_UINT256 = 2**256 - 1


def permit2_requirements(chain: DevChain, scheme: str, asset: str, **changes: Any) -> PaymentRequirements:
    """What a merchant asks: `AMOUNT` of `asset` to `PAY_TO` through Permit2 (`exact` with
    `assetTransferMethod: "permit2"`, or `upto` naming the facilitator's relayer); the token's EIP-712
    domain for the EIP-2612 token, as its permits need."""
    extra: dict[str, Any] = {"assetTransferMethod": "permit2"}
    if scheme == "upto":
        extra["facilitatorAddress"] = relayer_address(chain)
    if asset == chain.permit_asset:
        extra |= {"name": PERMIT_ASSET_NAME, "version": PERMIT_ASSET_VERSION}
    fields: dict[str, Any] = {
        "scheme": scheme,
        "network": chain.network,
        "asset": asset,
        "amount": AMOUNT,
        "pay_to": PAY_TO,
        "max_timeout_seconds": 120,
        "extra": extra,
    }
    fields.update(changes)
    return PaymentRequirements(**fields)


def funded_payer(chain: DevChain, asset: str, amount: int = 5 * AMOUNT, *, approved: bool = True) -> str:
    """A fresh payer's key holding `amount` of `asset`; `approved`: it approved Permit2 for all of it."""
    key = str(Account.create().key.to_0x_hex())
    chain.mint(Account.from_key(key).address, amount, asset=asset)
    if approved:
        chain.approve_permit2(key, asset)
    return key


def sdk_sign(
    chain: DevChain, key: str, asked: PaymentRequirements, *, eip2612: bool = False
) -> dict[str, Any]:
    """The whole payment payload (wire form) the SDK's client scheme of `asked.scheme` signs with `key`, as
    its x402 client sends it; `eip2612`: with its EIP-2612 approval of Permit2 (the SDK reads the payer's
    token nonce from the chain)."""
    account = Account.from_key(key)
    signer = EthAccountSignerWithRPC(account, chain.rpc_url) if eip2612 else EthAccountSigner(account)
    scheme = ExactEvmScheme(signer) if asked.scheme == "exact" else UptoEvmScheme(signer)
    declared: dict[str, Any] | None = {EIP2612_GAS_SPONSORING_KEY: {}} if eip2612 else None
    inner: dict[str, Any] = scheme.create_payment_payload(
        SdkRequirements.model_validate(asked.to_json_dict()), declared
    )
    extensions = inner.pop("__extensions", None)
    payment: dict[str, Any] = {"x402Version": 2, "payload": inner, "accepted": asked.to_json_dict()}
    if extensions:
        payment["extensions"] = extensions
    return payment


def parsed(payment: dict[str, Any]) -> Permit2PaymentPayload:
    """The wire payment as the facilitator's model."""
    return parse_permit2_payment_payload(payment)


def verify_body(payment: dict[str, Any], requirements: PaymentRequirements) -> dict[str, Any]:
    """A v2 `/verify` body for `payment`."""
    return {"x402Version": 2, "paymentPayload": payment, "paymentRequirements": requirements.to_json_dict()}


def approve_from(chain: DevChain, owner: str, asset: str, amount: int = _MAX_UINT256) -> None:
    """`owner` (a contract wallet, or an address without code yet) approves Permit2 on `asset`: sent as
    `owner` by anvil's impersonation, since no wallet of the dev chain can send a call of its own."""
    chain.rpc.call("anvil_setBalance", [owner, hex(10**18)])
    chain.rpc.call("anvil_impersonateAccount", [owner])
    try:
        data = encode_call("approve(address,uint256)", [PERMIT2_ADDRESS, amount])
        sent = chain.rpc.call(
            "eth_sendTransaction", [{"from": owner, "to": asset, "data": "0x" + data.hex()}]
        )
        receipt = chain.rpc.wait_for_receipt(sent, timeout_s=HANG_S)
        assert receipt["status"] == "0x1", receipt
    finally:
        chain.rpc.call("anvil_stopImpersonatingAccount", [owner])


def wallet_payment(
    chain: DevChain, wallet: str, owner_key: str, asked: PaymentRequirements
) -> dict[str, Any]:
    """A payment from contract `wallet` (funded, approved), signed by `owner_key` for it (ERC-1271)."""
    signed = sdk_sign(chain, owner_key, asked)
    return resign(signed, {"from": wallet}, key=owner_key, chain_id=chain.chain_id)


def counterfactual_payment(
    chain: DevChain, asked: PaymentRequirements, *, factory: str | None = None, approve: bool = True
) -> tuple[dict[str, Any], str]:
    """A payment from a `WalletFactory` wallet not deployed yet, holding and (`approve`) having approved
    `asked.asset`, signed by its owner and wrapped in ERC-6492 (through `factory`, by default the dev
    chain's). Returns (payment, wallet)."""
    owner = Account.create()
    salt = os.urandom(32)
    wallet = chain.counterfactual_wallet(owner.address, salt)
    chain.mint(wallet, 5 * AMOUNT, asset=asked.asset)
    if approve:
        approve_from(chain, wallet, asked.asset)
        # The approval left the address a nonce, where CREATE2 cannot deploy: back to a fresh address.
        chain.rpc.call("anvil_setNonce", [wallet, "0x0"])
    payment = wallet_payment(chain, wallet, owner.key.to_0x_hex(), asked)
    calldata = encode_call("createWallet(address,bytes32)", [owner.address, salt])
    payload = payment["payload"]
    payload["signature"] = wrap_erc6492(factory or chain.wallet_factory, calldata, payload["signature"])
    return payment, wallet
