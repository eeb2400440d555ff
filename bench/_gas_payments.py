"""The payments of the gas benchmark (`bench.gas_bench`): one per settlement kind, each from a fresh payer,
signed by the x402 Python SDK's own client schemes, so that both facilitators settle the very same payment.

The kinds: `exact` by EIP-3009 on the dev chain's USDC look-alike; `exact` by Permit2 on its plain ERC-20
(the payer approved Permit2 beforehand) and on its EIP-2612 token with the `eip2612GasSponsoring` permit
instead of an approval; `upto` the same two ways, settled for part of its maximum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_account import Account
from x402.extensions.eip2612_gas_sponsoring import EIP2612_GAS_SPONSORING_KEY
from x402.mechanisms.evm import EthAccountSigner, EthAccountSignerWithRPC
from x402.mechanisms.evm.exact import ExactEvmClientScheme
from x402.mechanisms.evm.upto import UptoEvmClientScheme
from x402.schemas import PaymentRequirements as SdkRequirements

from a2a_x402.devchain import PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION, DevChain

__all__ = ["KINDS", "Kind", "Payment", "kind_requirements", "make_payment", "sign_with_sdk"]

AMOUNT_ATOMIC = 1_000_000  # 1 unit of a 6-decimal token: the maximum of an `upto` payment
_USED_SHARE = 0.6  # what an `upto` payment's work used of its maximum
_VALIDITY_S = 600


@dataclass(frozen=True, slots=True)
class Kind:
    """A settlement kind: its scheme, its token (a `DevChain` field), and how Permit2 gets its allowance."""

    label: str
    scheme: str
    asset_field: str

    @property
    def permit2(self) -> bool:
        return self.asset_field != "asset"

    @property
    def sponsored(self) -> bool:
        """The payer sends an EIP-2612 permit of Permit2 with the payment instead of approving beforehand."""
        return self.asset_field == "permit_asset"

    @property
    def charged(self) -> int:
        """What the settlement moves: the price, or for `upto` what the work used."""
        return int(AMOUNT_ATOMIC * _USED_SHARE) if self.scheme == "upto" else AMOUNT_ATOMIC


KINDS = (
    Kind("exact, EIP-3009", "exact", "asset"),
    Kind("exact, Permit2", "exact", "plain_asset"),
    Kind("exact, Permit2 + EIP-2612 permit", "exact", "permit_asset"),
    Kind("upto, Permit2, 60 % used", "upto", "plain_asset"),
    Kind("upto, Permit2 + EIP-2612 permit, 60 % used", "upto", "permit_asset"),
)


@dataclass(frozen=True, slots=True)
class Payment:
    """A signed payment (wire form), the requirements it was signed for, and those it settles with."""

    kind: Kind
    payer: str
    payload: dict[str, Any]
    requirements: dict[str, Any]
    charged: dict[str, Any]

    def settle_body(self) -> dict[str, Any]:
        """The facilitator API's `POST /settle` body."""
        return {"x402Version": 2, "paymentPayload": self.payload, "paymentRequirements": self.charged}


def kind_requirements(chain: DevChain, kind: Kind, pay_to: str, relayer: str) -> dict[str, Any]:
    """The x402 v2 requirements (wire form) of `kind` for AMOUNT_ATOMIC of its token to `pay_to`; an `upto`
    payment names `relayer` as the facilitator that may settle it."""
    asset = getattr(chain, kind.asset_field)
    extra: dict[str, Any] = {}
    if kind.asset_field == "asset":
        extra = {"name": chain.asset_name, "version": chain.asset_version}
    elif kind.sponsored:
        extra = {"name": PERMIT_ASSET_NAME, "version": PERMIT_ASSET_VERSION}
    if kind.permit2:
        extra["assetTransferMethod"] = "permit2"
    if kind.scheme == "upto":
        extra["facilitatorAddress"] = relayer
    return {
        "scheme": kind.scheme,
        "network": chain.network,
        "asset": asset,
        "amount": str(AMOUNT_ATOMIC),
        "payTo": pay_to,
        "maxTimeoutSeconds": _VALIDITY_S,
        "extra": extra,
    }


def sign_with_sdk(kind: Kind, signer: EthAccountSigner, requirements: dict[str, Any]) -> dict[str, Any]:
    """The x402 v2 PaymentPayload (wire form) `signer` makes for `requirements` with the SDK's client scheme
    of `kind` (with the EIP-2612 permit in its extensions where `kind` is sponsored: `signer` must then be
    an `EthAccountSignerWithRPC`, which reads the token's permit nonce)."""
    scheme = ExactEvmClientScheme(signer) if kind.scheme == "exact" else UptoEvmClientScheme(signer)
    declared: dict[str, Any] | None = {EIP2612_GAS_SPONSORING_KEY: {}} if kind.sponsored else None
    inner: dict[str, Any] = scheme.create_payment_payload(
        SdkRequirements.model_validate(requirements), declared
    )
    extensions = inner.pop("__extensions", None)
    payload: dict[str, Any] = {"x402Version": 2, "payload": inner, "accepted": requirements}
    if extensions:
        payload["extensions"] = extensions
    if kind.sponsored and not extensions:
        raise RuntimeError(f"the SDK's client signed no EIP-2612 permit for {kind.label}")
    return payload


def make_payment(chain: DevChain, kind: Kind, *, pay_to: str, relayer: str) -> Payment:
    """A fresh payer holding the maximum of the kind's token (having approved Permit2 where the kind pays
    by Permit2 without a permit), and its payment to `pay_to` signed by the SDK's client scheme."""
    account = Account.create()
    asset = getattr(chain, kind.asset_field)
    chain.mint(account.address, AMOUNT_ATOMIC, asset=asset)
    if kind.permit2 and not kind.sponsored:
        chain.approve_permit2(account.key.to_0x_hex(), asset)
    requirements = kind_requirements(chain, kind, pay_to, relayer)
    payload = sign_with_sdk(kind, EthAccountSignerWithRPC(account, chain.rpc_url), requirements)
    charged = requirements | {"amount": str(kind.charged)}
    return Payment(kind, account.address, payload, requirements, charged)
