"""The settlement kinds the facilitator benchmark measures beside `exact` by EIP-3009 (issue 29): `exact` by
Permit2 and `upto` settled for 60 % of its maximum, both on the dev chain's plain ERC-20 (no EIP-3009, no
EIP-2612), paid by the benchmark's payers, who approve Permit2 once in the setup (`prepare_payers`, before
the snapshot every segment starts from).

Payments are signed by the x402 SDK's own client schemes, as the gas benchmark's are
(``bench._gas_payments``), with random Permit2 nonces, so one payer's payments settle in any order. The
node ceiling's transaction for a payment calls the scheme's x402 Permit2 proxy's ``settle`` from the
relayer (an `upto` witness names the relayer as its facilitator), encoded here from the proxies' ABI, not
by our facilitator: the ceiling does not rest on the code it is compared with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eth_abi.abi import encode
from eth_account import Account
from eth_utils.crypto import keccak
from x402.mechanisms.evm import EthAccountSigner

from a2a_x402.devchain import DevChain

from ._gas_payments import AMOUNT_ATOMIC, KINDS, Kind, kind_requirements, sign_with_sdk
from ._payloads import EIP3009_KIND, Batch, facilitator_body

__all__ = ["KIND_NAMES", "PERMIT2_KINDS", "Permit2Batches", "prepare_payers"]


def _kind(scheme: str) -> Kind:
    return next(k for k in KINDS if k.scheme == scheme and k.permit2 and not k.sponsored)


PERMIT2_KINDS: tuple[Kind, ...] = (_kind("exact"), _kind("upto"))
"""`exact` and `upto` by Permit2 on the plain ERC-20, the payer's allowance approved beforehand."""
KIND_NAMES: dict[str, str] = {
    "eip3009": EIP3009_KIND,
    "permit2": PERMIT2_KINDS[0].label,
    "upto": PERMIT2_KINDS[1].label,
}
"""The `--kinds` names of the settlement kinds, with the label each has in the summary."""

# Enough of the plain ERC-20 (18 decimals) for any segment's share of one payer's payments.
_PAYER_BALANCE = 10**9 * AMOUNT_ATOMIC
_PERMIT = "((address,uint256),uint256,uint256)"
_SETTLE_TYPES = {
    "exact": [_PERMIT, "address", "(address,uint256)", "bytes"],
    "upto": [_PERMIT, "uint256", "address", "(address,address,uint256)", "bytes"],
}
_SELECTORS = {
    scheme: keccak(text=f"settle({','.join(types)})")[:4] for scheme, types in _SETTLE_TYPES.items()
}


def prepare_payers(chain: DevChain, payer_keys: Sequence[str]) -> None:
    """Give each payer plenty of the plain ERC-20 and have it approve Permit2 (its one on-chain step)."""
    for key in payer_keys:
        chain.mint(Account.from_key(key).address, _PAYER_BALANCE, asset=chain.plain_asset)
        chain.approve_permit2(key, chain.plain_asset)


def _proxy_call(kind: Kind, chain: DevChain, inner: dict[str, Any], charged: int) -> tuple[str, bytes]:
    """The relayer's call of the kind's proxy that settles the SDK-made payload `inner` for `charged`."""
    auth = inner["permit2Authorization"]
    witness = auth["witness"]
    permit = (
        (auth["permitted"]["token"], int(auth["permitted"]["amount"])),
        int(auth["nonce"]),
        int(auth["deadline"]),
    )
    signature = bytes.fromhex(inner["signature"].removeprefix("0x"))
    args: list[object]
    if kind.scheme == "upto":
        args = [
            permit,
            charged,
            auth["from"],
            (witness["to"], witness["facilitator"], int(witness["validAfter"])),
            signature,
        ]
        proxy = chain.upto_permit2_proxy
    else:
        args = [permit, auth["from"], (witness["to"], int(witness["validAfter"])), signature]
        proxy = chain.exact_permit2_proxy
    return proxy, _SELECTORS[kind.scheme] + encode(_SETTLE_TYPES[kind.scheme], args)


class Permit2Batches:
    """Signs batches of one Permit2 kind's payments to `pay_to`, from `payer_keys` in turn."""

    def __init__(self, chain: DevChain, kind: Kind, *, pay_to: str, payer_keys: Sequence[str]) -> None:
        self.chain = chain
        self.kind = kind
        relayer = Account.from_key(chain.relayer_key).address
        self.requirements = kind_requirements(chain, kind, pay_to, relayer)
        # What `/settle` is asked to move: an `upto` payment's work used part of its maximum.
        self.charged_requirements = self.requirements | {"amount": str(kind.charged)}
        self.signers = [EthAccountSigner(Account.from_key(key)) for key in payer_keys]

    def sign(self, count: int) -> Batch:
        """`count` fresh payments: verified against the requirements they were signed for (an `upto`
        payment's maximum), settled for what the kind charges."""
        payloads = [
            sign_with_sdk(self.kind, self.signers[i % len(self.signers)], self.requirements)
            for i in range(count)
        ]
        return Batch(
            kind=self.kind.label,
            asset=getattr(self.chain, self.kind.asset_field),
            charged=self.kind.charged,
            verify_bodies=tuple(facilitator_body(p, self.requirements) for p in payloads),
            settle_bodies=tuple(facilitator_body(p, self.charged_requirements) for p in payloads),
            calls=tuple(
                _proxy_call(self.kind, self.chain, p["payload"], self.kind.charged) for p in payloads
            ),
        )
