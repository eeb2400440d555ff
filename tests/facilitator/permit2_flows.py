"""The Permit2 payments the x402 SDKs' own resource servers and clients make and settle through our HTTP
service (tests/facilitator/test_app_ts_permit2.py, test_app_sdk_permit2.py): the cases, the price a
resource server is configured with, and the checks on chain after the settlement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi.abi import decode

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, encode_call
from tests.fixtures.facilitator import PAY_TO

from .payments import relayer_address, relayer_nonce, transfer_logs_of
from .permit2_chain import AMOUNT, funded_payer, permit2_requirements

__all__ = [
    "CASES",
    "EIP2612_DECLARED",
    "OVER_THE_MAXIMUM",
    "UNUSED",
    "Before",
    "Case",
    "check_nothing_moved",
    "check_settled_once",
    "offer_of",
    "payer_for",
]


@dataclass(frozen=True)
class Case:
    """One payment: its scheme, its token (a `DevChain` field), and what the work used (None: `exact`)."""

    scheme: str
    asset_field: str
    used: int | None = None

    @property
    def sponsored(self) -> bool:
        """Paid on the EIP-2612 token with a permit of Permit2 beside it, no approval made beforehand."""
        return self.asset_field == "permit_asset"

    @property
    def settled(self) -> int:
        """What the settlement moves: the price, or what the work used (below the maximum)."""
        return AMOUNT if self.used is None else self.used


CASES = {
    "exact, plain ERC-20, approved": Case("exact", "plain_asset"),
    "exact, EIP-2612 token, sponsored": Case("exact", "permit_asset"),
    "upto, plain ERC-20, approved, a third used": Case("upto", "plain_asset", AMOUNT // 3),
    "upto, EIP-2612 token, sponsored, a quarter used": Case("upto", "permit_asset", AMOUNT // 4),
}

UNUSED = Case("upto", "plain_asset", 0)
"""An `upto` payment whose work used nothing: settled with no transaction."""
OVER_THE_MAXIMUM = Case("upto", "plain_asset", AMOUNT + 1)
"""An `upto` payment a server tries to settle for more than its maximum: refused."""

EIP2612_DECLARED = {
    "eip2612GasSponsoring": {
        "info": {"description": "EIP-2612 permits of Permit2 are relayed", "version": "1"},
        "schema": {"type": "object"},
    }
}
"""What a resource server declares to take an EIP-2612 permit of Permit2 beside a payment: the SDK's client
looks for the key, and merges the permit it signs into the declared `info`."""


def offer_of(chain: DevChain, case: Case) -> dict[str, Any]:
    """What the resource server is configured with (wire names): the SDK's server scheme adds the rest,
    for `upto` the facilitator's address from our `/supported`."""
    asked = permit2_requirements(chain, case.scheme, getattr(chain, case.asset_field)).to_json_dict()
    extra = {name: value for name, value in asked["extra"].items() if name != "facilitatorAddress"}
    return {key: asked[key] for key in ("scheme", "network", "asset", "amount", "payTo")} | {"extra": extra}


def payer_for(chain: DevChain, case: Case, *, approved: bool | None = None) -> str:
    """A fresh payer's key holding five times `AMOUNT` of the case's token, having approved Permit2
    (`approved`; by default unless the case pays with a permit instead)."""
    approve = not case.sponsored if approved is None else approved
    return funded_payer(chain, getattr(chain, case.asset_field), approved=approve)


@dataclass(frozen=True)
class Before:
    """What the checks compare with: the payer's and the payee's token balances, the relayer's nonce."""

    payer: int
    payee: int
    relayer_nonce: int

    @classmethod
    def read(cls, chain: DevChain, case: Case, payer: str) -> Before:
        asset = getattr(chain, case.asset_field)
        return cls(
            chain.balance_of(payer, asset=asset), chain.balance_of(PAY_TO, asset=asset), relayer_nonce(chain)
        )


def _permit2_allowance(chain: DevChain, owner: str, asset: str) -> int:
    data = encode_call("allowance(address,address)", [owner, PERMIT2_ADDRESS])
    (allowance,) = decode(["uint256"], chain.rpc.eth_call(asset, data))
    return int(allowance)


def check_settled_once(chain: DevChain, case: Case, payer: str, before: Before, transaction: str) -> None:
    """`transaction`, sent by our relayer to the scheme's proxy, moved exactly the settled amount from
    `payer` to the payee, and nothing else moved since `before`."""
    asset = getattr(chain, case.asset_field)
    proxy = chain.exact_permit2_proxy if case.scheme == "exact" else chain.upto_permit2_proxy
    sent = chain.rpc.call("eth_getTransactionByHash", [transaction])
    assert (sent["from"].lower(), sent["to"].lower()) == (relayer_address(chain).lower(), proxy.lower())
    assert transfer_logs_of(chain, transaction) == [
        (asset.lower(), payer.lower(), PAY_TO.lower(), case.settled)
    ]
    assert (
        chain.balance_of(payer, asset=asset),
        chain.balance_of(PAY_TO, asset=asset),
        relayer_nonce(chain),
    ) == (before.payer - case.settled, before.payee + case.settled, before.relayer_nonce + 1)
    if case.sponsored:
        # The permit approved Permit2 for the maximum; the transfer used what was settled of it.
        assert _permit2_allowance(chain, payer, asset) == AMOUNT - case.settled


def check_nothing_moved(chain: DevChain, case: Case, payer: str, before: Before, nonce: int) -> None:
    """No token moved since `before`, the relayer sent nothing, and the payer's Permit2 `nonce` is unspent."""
    asset = getattr(chain, case.asset_field)
    assert (
        chain.balance_of(payer, asset=asset),
        chain.balance_of(PAY_TO, asset=asset),
        relayer_nonce(chain),
    ) == (before.payer, before.payee, before.relayer_nonce)
    assert not chain.permit2_nonce_used(payer, nonce)
