"""How a fault scenario's client pays: by EIP-3009, `exact` by Permit2, `upto` for a metered skill, or by
EIP-3009 with AP2 mandates (the embedded flow, §20).

The most telling scenarios run once per kind of payment (`KINDS`), so the invariants are shown for each
transfer method, not only EIP-3009:

- `eip3009`: the reference merchant asking for the dev chain's EIP-3009 token;
- `permit2`: `exact` by Permit2 (`X402_ASSET_TRANSFER_METHOD=permit2`) of the dev chain's plain ERC-20,
  which has no EIP-3009;
- `upto`: the default tenant metering text-stats up to `MAXIMUM` (`[default.metered_skills]`), its work
  reporting less than that (`metered_serve.py`), so the payment settles less than the payer signed for;
- `upto-nothing`: the same, its work reporting no usage: the payment settles 0, sends nothing and books
  nothing;
- `ap2`: EIP-3009 to the default tenant offering the embedded flow (`[default.ap2]`: a checkout key made
  at run time, the JWK Set of the suite's test issuer, `issuer_key`): the client presents the closed AP2
  checkout and payment mandates of a fresh open mandate (issued with the AP2 SDK, `tests.fixtures.ap2`)
  with its payment, closed over the round's `ap2-checkout` by the payer library (`present_mandates`).

Each payer is fresh, funded with the token it pays, and (for Permit2) has approved Permit2 once; each
signs with the product's payer library (`a2a_x402.payer`).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import Ap2Mandates
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from a2a_x402.payer import Permit2Payment, present_mandates, sign_payment, sign_permit2_payment
from tests.fixtures.ap2 import MERCHANT, OpenTerms, issue_open_mandates, new_key, public_jwks
from tests.fixtures.merchant import DEFAULT_PAY_TO, DEFAULT_PRICE
from tests.merchant.ap2.support import write_key

from .clients import JSON
from .metered_serve import UNIT_PRICE
from .processes import SERVE

__all__ = [
    "AP2",
    "EIP3009",
    "KINDS",
    "MAXIMUM",
    "PERMIT2",
    "UPTO",
    "UPTO_NOTHING",
    "PaymentKind",
    "Signed",
    "issuer_key",
]

MAXIMUM = 500_000
"""The most a metered task may cost: what an `upto` payer signs for."""
_PAYER_FUNDS = 10**9
_PLAIN_ASSET_DECIMALS = 18


@dataclass(frozen=True)
class Signed:
    """A signed payment: its wire form, what keys its settlement (`payer`, and `nonce` as the
    `settlement_claims` table keys it: EIP-3009's nonce, or the Permit2 nonce as 64 hex digits), and the
    closed AP2 mandates presented with it (`ap2` only)."""

    model: PaymentPayload | Permit2Payment
    payer: str
    nonce: str
    permit2_nonce: int | None
    mandates: Ap2Mandates | None = None

    @property
    def wire(self) -> JSON:
        """The payment as the client sends it."""
        return self.model.to_json_dict()

    def used_on_chain(self, chain: DevChain) -> bool:
        """Whether its nonce is spent on chain (the token's EIP-3009 state, or Permit2's bitmap)."""
        if self.permit2_nonce is not None:
            return chain.permit2_nonce_used(self.payer, self.permit2_nonce)
        return chain.authorization_state(self.payer, bytes.fromhex(self.nonce[2:]))


@dataclass(frozen=True)
class PaymentKind:
    """One way the fault suite's client pays the merchant; `tokens` is what an `upto` turn's work uses."""

    name: str
    method: str  # "eip3009", "permit2" (exact by Permit2) or "upto"
    tokens: int = 0
    ap2: bool = False
    """Whether the tenant offers the embedded flow and the client presents AP2 mandates."""

    @property
    def metered(self) -> bool:
        """Whether the skill is metered (`upto`)."""
        return self.method == "upto"

    @property
    def charged(self) -> int:
        """What a paid turn settles: the price, or the usage's cost capped at the maximum."""
        return min(self.tokens * UNIT_PRICE, MAXIMUM) if self.metered else DEFAULT_PRICE

    @property
    def sends_nothing(self) -> bool:
        """Whether a paid turn settles 0: no transaction, no booking."""
        return self.charged == 0

    def asset(self, chain: DevChain) -> str:
        """The token the merchant asks for: the plain ERC-20 for `exact` by Permit2, else the EIP-3009 one
        (which `upto` moves through Permit2 too)."""
        return chain.plain_asset if self.method == "permit2" else chain.asset

    def command(self) -> tuple[str, ...]:
        """The command line of a merchant taking this kind."""
        if not self.metered:
            return SERVE
        # -P: the script's own directory (this test package) must not shadow an installed module.
        return (
            sys.executable,
            "-P",
            str(Path(__file__).with_name("metered_serve.py")),
            "--tokens",
            str(self.tokens),
        )

    def settings(self, chain: DevChain, workdir: Path) -> dict[str, Any]:
        """The merchant settings (`MerchantSettings` fields) asking for this kind, files written to
        `workdir`."""
        if self.method == "permit2":
            return {
                "asset": chain.plain_asset,
                "asset_transfer_method": "permit2",
                "asset_decimals": _PLAIN_ASSET_DECIMALS,
            }
        if self.ap2:
            return {"tenants_file": _ap2_tenants(workdir)}
        if not self.metered:
            return {}
        tenants = workdir / "metered-tenants.toml"
        tenants.write_text(
            f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = {DEFAULT_PRICE}\n'
            f"[default.metered_skills]\ntext-stats = {MAXIMUM}\n"
        )
        return {"tenants_file": tenants}

    def new_payer(self, chain: DevChain) -> str:
        """A fresh payer's key holding the token (and, for Permit2, having approved Permit2 for it)."""
        if self.method == "eip3009":
            return chain.new_payer()
        key = str(Account.create().key.to_0x_hex())
        chain.mint(Account.from_key(key).address, _PAYER_FUNDS, asset=self.asset(chain))
        chain.approve_permit2(key, self.asset(chain))
        return key

    def sign(
        self,
        key: str,
        terms: PaymentRequirements,
        *,
        valid_before: int | None = None,
        checkout: str | None = None,
    ) -> Signed:
        """The payment `key` signs for `terms` with the payer library, valid before `valid_before` when given
        (a Permit2 deadline of the second before: Permit2 accepts a block stamped at the deadline itself);
        for `ap2`, with the mandates of a fresh open mandate closed over the round's `checkout` JWT.

        Raises:
            AssertionError: the terms are not of this kind, or an `ap2` round offered no checkout.
        """
        extra = terms.extra or {}
        asked = "upto" if terms.scheme == "upto" else extra.get("assetTransferMethod", "eip3009")
        if asked != self.method:
            raise AssertionError(f"the merchant asks for {terms.scheme} by {asked}, not {self.name}")
        if self.ap2 and checkout is None:
            raise AssertionError("the merchant offered no ap2-checkout for an ap2 payment")
        if self.method == "eip3009":
            payment = sign_payment(key, terms, valid_before=valid_before)
            authorization = payment.payload.authorization
            mandates = None if checkout is None or not self.ap2 else _mandates(payment, checkout, extra)
            return Signed(payment, authorization.from_address, authorization.nonce, None, mandates)
        deadline = None if valid_before is None else valid_before - 1
        signed = sign_permit2_payment(key, terms, deadline=deadline)
        permit = signed.payload.permit2_authorization
        return Signed(signed, permit.from_address, f"0x{permit.nonce:064x}", permit.nonce)

    def param(self) -> object:
        """This kind as a pytest parameter named after it."""
        return pytest.param(self, id=self.name)


EIP3009 = PaymentKind("eip3009", "eip3009")
PERMIT2 = PaymentKind("permit2", "permit2")
UPTO = PaymentKind("upto", "upto", tokens=7)
"""A metered turn using 7 tokens: 175 atomic units of the 500 000 signed for."""
UPTO_NOTHING = PaymentKind("upto-nothing", "upto", tokens=0)
AP2 = PaymentKind("ap2", "eip3009", ap2=True)
"""EIP-3009 with AP2 mandates, to the default tenant offering the embedded flow (25 cents at par)."""
KINDS = [EIP3009.param(), PERMIT2.param(), UPTO.param()]
"""The kinds a scenario shown for every transfer method runs with (`upto-nothing` only where it has a step
of its own)."""


@cache
def issuer_key() -> Any:
    """The suite's test issuer of open mandates (a P-256 JWK, made once): the `ap2` tenant's trusted
    surface."""
    return new_key("fault-suite-surface")


def _ap2_tenants(workdir: Path) -> Path:
    """The tenants file of an `ap2` merchant in `workdir`: the default tenant offering the embedded flow,
    with a checkout key made now and `issuer_key`'s public JWK Set as its trusted issuers."""
    write_key(workdir / "ap2-checkout.pem")
    (workdir / "ap2-issuers.jwks.json").write_text(json.dumps(public_jwks(issuer_key())))
    merchant = f'{{ id = "{MERCHANT.id}", name = "{MERCHANT.name}", website = "{MERCHANT.website}" }}'
    tenants = workdir / "ap2-tenants.toml"
    tenants.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = {DEFAULT_PRICE}\n\n'
        f"[default.ap2]\nmerchant = {merchant}\n"
        'checkout_keys = ["ap2-checkout.pem"]\nissuers = ["ap2-issuers.jwks.json"]\n'
    )
    return tenants


def _mandates(payment: PaymentPayload, checkout: str, extra: dict[str, Any]) -> Ap2Mandates:
    """The closed mandates of `payment`, over a fresh open mandate `issuer_key` issued for a new agent key."""
    now = int(time.time())
    opened = issue_open_mandates(issuer_key(), new_key(), OpenTerms(), now=now)
    return present_mandates(opened, checkout, payment.to_json_dict(), MERCHANT.id, extra["offerId"], now=now)
