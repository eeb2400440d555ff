"""The shop every independent client pays: the reference merchant on the test chain, and what it must book.

`shop` is one real merchant (`start_merchant`: `x402-merchant`'s app under uvicorn on 127.0.0.1, the
in-process facilitator, a fresh migrated SQLite database) serving the default tenant and the named tenant
`acme`, each with its own payee and price. `Shop.assert_paid_once` is the one check every client's run ends
with: exactly one settlement on chain (the receipt's transaction moved exactly the price, or what an `upto`
payment settled, of the shop's token from the payer to the tenant's payee, and the payee's balance grew by
exactly that) and exactly one ledger entry, for that task, tenant, payer, token, amount and transaction.

SQLite only: the clients differ, the booking does not (it runs on PostgreSQL too in tests/merchant/), and
every paid run costs suite time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from eth_utils.crypto import keccak

from a2a_x402.devchain import DevChain
from tests.fixtures.chain import idle_for
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    MerchantStarter,
    RunningMerchant,
    ledger_entries,
    write_tenants_file,
)

NAMED_TENANT = "acme"
"""The named tenant the clients pay besides the default one ("")."""

TENANTS = ("", NAMED_TENANT)
"""Tenant ids as the tests parametrize them: "" is the default tenant (requests without a tenant)."""

TEXT = "The quick brown fox jumps over the lazy dog. The dog sleeps."
"""The priced request: text-stats counts its words."""

_TRANSFER_TOPIC = "0x" + keccak(text="Transfer(address,address,uint256)").hex()


@dataclass(frozen=True)
class Shop:
    """The merchant the clients pay, its chain, each tenant's (payee, price), and the token it asks for
    (None: the chain's EIP-3009 dev token)."""

    merchant: RunningMerchant
    chain: DevChain
    payees: dict[str, tuple[str, int]]
    opening_balances: dict[str, int]
    asset: str | None = None

    @property
    def token(self) -> str:
        """The token the merchant's terms ask for."""
        return self.asset or self.chain.asset

    @property
    def base_url(self) -> str:
        """Where the merchant is served (its card is at `/.well-known/agent-card.json`)."""
        return self.merchant.base_url

    def price(self, tenant: str) -> int:
        """The tenant's text-stats price, in atomic units."""
        return self.payees[tenant][1]

    def pay_to(self, tenant: str) -> str:
        """The tenant's payee address."""
        return self.payees[tenant][0]

    def new_payer(self) -> str:
        """A fresh payer key holding 1000 dev USDC and no ETH."""
        return self.chain.new_payer()

    async def assert_paid_once(
        self, *, tenant: str, task_id: str, payer_key: str, transaction: str, amount: int | None = None
    ) -> None:
        """The task was settled once, on chain and in the ledger: `amount` (by default the price) of the
        shop's token, from the payer to the payee."""
        payer = Account.from_key(payer_key).address
        pay_to, price = self.payees[tenant]
        price = price if amount is None else amount
        receipt: dict[str, Any] = self.chain.rpc.call("eth_getTransactionReceipt", [transaction])
        assert receipt is not None and receipt["status"] == "0x1", receipt
        transfers = [
            (_address(log["topics"][1]), _address(log["topics"][2]), int(log["data"], 16))
            for log in receipt["logs"]
            if log["address"].lower() == self.token.lower() and log["topics"][0] == _TRANSFER_TOPIC
        ]
        assert transfers == [(payer.lower(), pay_to.lower(), price)], receipt["logs"]
        for other, opening in self.opening_balances.items():
            credited = price if other == tenant else 0
            assert self.chain.balance_of(self.pay_to(other), asset=self.token) == opening + credited, other
        [entry] = await ledger_entries(self.merchant.database_url)
        booked = (entry.tenant, entry.task_id, entry.payer, entry.pay_to, entry.asset)
        assert booked == (tenant, task_id, payer, pay_to, self.token)
        assert (entry.amount, entry.tx_hash) == (price, transaction)
        debits = sum(amount for direction, amount, _ in entry.lines if direction == "debit")
        credits = sum(amount for direction, amount, _ in entry.lines if direction == "credit")
        assert debits == credits == price, entry.lines


def _address(topic: str) -> str:
    """The address in an indexed event topic (32 bytes, left-padded), lower case."""
    return "0x" + topic[-40:].lower()


IDLE_S = 600
"""How old the head block is when a client starts paying."""


@pytest.fixture
def shop(start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path) -> Shop:
    """The reference merchant on a fresh SQLite database, serving the default tenant and `acme`, on a chain
    idle for ten minutes: its head is that old when the client pays, as on a chain that mines only when a
    transaction arrives (the validity window is judged by the clock, not by a stale head)."""
    payees = {"": (DEFAULT_PAY_TO, DEFAULT_PRICE), NAMED_TENANT: TWO_TENANTS[NAMED_TENANT]}
    tenants_file = write_tenants_file(tmp_path / "tenants.toml", payees)
    merchant = start_merchant(sqlite_url, tenants_file=tenants_file)
    opening = {tenant: chain.balance_of(pay_to) for tenant, (pay_to, _) in payees.items()}
    idle_for(chain.rpc, IDLE_S)
    return Shop(merchant, chain, payees, opening)
