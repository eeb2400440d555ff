"""Shared steps of the differences tests: a payment no offer explains, and reconcile passes that store."""

from __future__ import annotations

from collections.abc import Callable

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator
from a2a_x402.merchant.differences import DifferenceState, DifferenceStore, StoredDifference
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.payments import OfferStore
from a2a_x402.merchant.reconciler import Reconciler, ReconcileReport
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.merchant.wiring import build_reconciler
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.payments import submit_directly
from tests.fixtures.merchant import MerchantStarter, MerchantWire, offered_terms, user_message


async def unexplained_payment(
    database_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> tuple[MerchantSettings, str]:
    """A payment to the default payee on chain that no offer was paid with; (settings, its tx nonce)."""
    merchant = start_merchant(database_url)
    async with merchant.http() as http:
        task = (await MerchantWire(http, "jsonrpc").send(user_message()))["task"]
    merchant.stop()
    payload = sign_payment(new_payer(), offered_terms(task).accepts[0])
    submit_directly(chain, payload)
    chain.rpc.call("evm_mine")
    return merchant.settings, payload.payload.authorization.nonce


class Passes:
    """Reconcile passes of one reconciler (it remembers how far it read) on `settings`' database."""

    def __init__(self, settings: MerchantSettings) -> None:
        self.engine = create_engine(settings.database_url)
        self.facilitator = Facilitator.from_settings(settings.facilitator_settings(), engine=self.engine)
        self.store = DifferenceStore(self.engine)
        self.reconciler: Reconciler = build_reconciler(
            settings,
            engine=self.engine,
            facilitator=self.facilitator,
            offers=OfferStore(self.engine),
            ledger=Ledger(self.engine, Outbox(self.engine)),
        )

    async def run(self) -> ReconcileReport:
        """One pass."""
        return await self.reconciler.run_once()

    async def all(self) -> list[StoredDifference]:
        """Every stored difference, open or closed."""
        return await self.store.listed(states=tuple(DifferenceState))

    async def aclose(self) -> None:
        """Close the reconciler, the facilitator and the engine."""
        await self.reconciler.aclose()
        await self.facilitator.aclose()
        await self.engine.dispose()
