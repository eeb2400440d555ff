"""Fault-suite fixtures: one `Scenario` bundling what a fault scenario runs on.

Every scenario runs real `x402-merchant serve` processes against the session's anvil node (rolled back
after the test) and a fresh PostgreSQL database, then checks the invariants of `tests.fixtures.invariants`
from the chain and the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import PaymentRequirements
from tests.fixtures.invariants import InvariantReport, assert_invariants
from tests.fixtures.merchant import DEFAULT_PAY_TO

from .database import DatabaseProbe
from .payments import EIP3009, PaymentKind, Signed
from .processes import MerchantProcess, MerchantProcesses, merchant_processes
from .proxy import ThreadedRpcProxy, threaded_rpc_proxy

PAY_TOS = (DEFAULT_PAY_TO,)
"""The payTo of every tenant the fault suite's merchants serve (the default tenant only)."""


@dataclass
class Scenario:
    """The real resources of one fault scenario, all cleaned up after it.

    `merchants` starts `x402-merchant serve` processes on `chain` and the fresh PostgreSQL database at
    `database_url`; `database` locks, waits and kills connections there; `proxy` (started when first used)
    stands between a merchant and the node, holding requests or cutting the node off. Transfers from
    `first_block` on belong to the scenario.
    """

    chain: DevChain
    database_url: str
    merchants: MerchantProcesses
    database: DatabaseProbe
    first_block: int
    workdir: Path
    _stack: ExitStack = field(repr=False)

    @cached_property
    def proxy(self) -> ThreadedRpcProxy:
        """A proxy to the chain's node that can hold requests or cut the node off."""
        return self._stack.enter_context(threaded_rpc_proxy(self.chain.rpc_url))

    def new_payer(self, kind: PaymentKind = EIP3009) -> str:
        """A fresh payer's key for `kind`: holding the token (and no ETH, unless it approved Permit2)."""
        return kind.new_payer(self.chain)

    def sign(
        self,
        kind: PaymentKind,
        key: str,
        terms: PaymentRequirements,
        checkout: str | None,
        *,
        valid_before: int | None = None,
    ) -> Signed:
        """`kind.sign`; the signatures of the AP2 mandates presented with it (their issuer's and the
        agent's key binding) are then secrets no merchant log or output may hold a piece of."""
        signed = kind.sign(key, terms, valid_before=valid_before, checkout=checkout)
        if signed.mandates is not None:
            for name, token in (
                ("checkout mandate", signed.mandates.checkout_mandate),
                ("payment mandate", signed.mandates.payment_mandate),
            ):
                issued, *_, binding = token.split("~")
                self.merchants.keep_secret(f"{name}'s issuer signature", issued.rsplit(".", 1)[-1])
                self.merchants.keep_secret(f"{name}'s key binding signature", binding.rsplit(".", 1)[-1])
        return signed

    async def start(self, kind: PaymentKind = EIP3009, **settings: Any) -> MerchantProcess:
        """Start a merchant asking to be paid by `kind` (`MerchantProcesses.start` with `settings`)."""
        return await self.merchants.start(
            command=kind.command(), **{**kind.settings(self.chain, self.workdir), **settings}
        )

    async def invariants(
        self,
        *,
        pay_tos: Iterable[str] = PAY_TOS,
        confirmations: int = 1,
        expect_reversed: Collection[str] = (),
        client_views: Mapping[str, str] | None = None,
    ) -> InvariantReport:
        """`assert_invariants` over the scenario's blocks and database (see there for the arguments)."""
        return await assert_invariants(
            self.chain,
            self.database_url,
            pay_tos,
            from_block=self.first_block,
            confirmations=confirmations,
            expect_reversed=expect_reversed,
            client_views=client_views,
        )


@pytest.fixture
async def scenario(chain: DevChain, postgres_url: str, tmp_path: Path) -> AsyncIterator[Scenario]:
    """The chain, a fresh PostgreSQL database, merchant processes on them, a probe and a proxy."""
    first_block = int(chain.rpc.call("eth_blockNumber"), 16) + 1
    database = DatabaseProbe(postgres_url)
    try:
        with ExitStack() as stack:
            merchants = stack.enter_context(merchant_processes(chain, postgres_url, tmp_path))
            yield Scenario(chain, postgres_url, merchants, database, first_block, tmp_path, stack)
    finally:
        await database.aclose()
