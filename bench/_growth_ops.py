"""The operations the growth benchmark times, each on one database through the project's own API.

One `Books` is one merchant database (ledger, outbox, offers, claims) beside the shared dev chain; every
operation is what a running merchant or facilitator does, called the way they call it:

* book: `Ledger.book_settlement` of one more settlement (it writes the event and its delivery too);
* balance: `LedgerReader.balance` of a tenant;
* statement: `LedgerReader.statement` of one tenant's day (the same bookings in every database);
* webhook claim: `DeliveryWorker.run_once` claiming and delivering the delivery the booking queued;
* reconcile: one `Reconciler.run_once` pass (claims, paid turns, the chain scan, unfinalized bookings);
* claim: `ClaimStore.claim` of a new authorization, as a settle does first.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.facilitator import ClaimKey, ClaimStore, Facilitator
from a2a_x402.merchant.ledger import Ledger, SettlementBooking
from a2a_x402.merchant.payments import OfferStore
from a2a_x402.merchant.reconciler import Reconciler
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.tenants import TenantRegistry
from a2a_x402.merchant.webhooks import DeliveryWorker, Outbox
from a2a_x402.merchant.wiring import build_reconciler

__all__ = ["OPERATIONS", "Books", "Receiver", "Step", "timed"]

OPERATIONS = ("book", "balance", "statement", "webhook claim", "reconcile", "claim")

Step = Callable[[], Awaitable[None]]

_PAYER = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"


def _nonce() -> str:
    return "0x" + secrets.token_hex(32)


class Receiver:
    """A webhook receiver on 127.0.0.1 that answers every request 200 with an empty body."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        """Start listening; returns the URL to subscribe."""
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hook"

    async def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@dataclass
class Books:
    """One merchant database and the project's objects that work on it."""

    label: str
    engine: AsyncEngine
    settings: MerchantSettings
    tenants: TenantRegistry
    measured_tenant: str
    booking_tenant: str
    day_start: datetime

    def __post_init__(self) -> None:
        self.ledger = Ledger(self.engine, Outbox(self.engine))
        self.claims = ClaimStore(self.engine)
        self._http = httpx.AsyncClient(timeout=5.0)
        self.worker = DeliveryWorker(self.engine, self._http, allow_private_targets=True)
        self._facilitator = Facilitator.from_settings(
            self.settings.facilitator_settings(), engine=self.engine
        )
        self.reconciler: Reconciler = build_reconciler(
            self.settings,
            engine=self.engine,
            facilitator=self._facilitator,
            offers=OfferStore(self.engine),
            ledger=self.ledger,
            tenants=self.tenants,
        )

    async def aclose(self) -> None:
        """Close the connections the operations opened."""
        await self.reconciler.aclose()
        await self._facilitator.aclose()
        await self._http.aclose()

    def booking(self, tenant: str, *, at: datetime, block_number: int) -> SettlementBooking:
        """A booking of a fresh authorization to `tenant`, settled at `at`."""
        pay_to = self.tenants.require(tenant).pay_to
        return SettlementBooking(
            tenant=tenant,
            task_id=f"task-{secrets.token_hex(8)}",
            context_id=f"ctx-{secrets.token_hex(8)}",
            payer=_PAYER,
            pay_to=pay_to,
            asset=self.settings.asset,
            network=self.settings.network,
            chain_id=int(self.settings.network.split(":")[1]),
            amount=10_000,
            nonce=_nonce(),
            tx_hash=_nonce(),
            block_number=block_number,
            settled_at=at,
        )

    async def book_final(self, tenant: str, *, at: datetime) -> None:
        """Book and finalize one settlement (seed data: the reconciler has nothing left to watch)."""
        entry = await self.ledger.book_settlement(self.booking(tenant, at=at, block_number=1))
        await self.ledger.mark_final(entry.id, confirmations=1)

    async def deliver_all(self) -> None:
        """Deliver every due webhook delivery."""
        while await self.worker.run_once():
            pass

    def operations(self) -> list[tuple[str, Step, Step | None]]:
        """(name, operation, untimed step after it) in `OPERATIONS` order, the order of each round."""
        booked: list[str] = []
        claimed: list[str] = []
        chain_id = int(self.settings.network.split(":")[1])

        async def book() -> None:
            entry = await self.ledger.book_settlement(
                self.booking(self.booking_tenant, at=self.day_start, block_number=1)
            )
            booked.append(entry.id)

        async def finalize() -> None:
            # The reconciler must not watch the booking: it has no transaction on the chain.
            await self.ledger.mark_final(booked.pop(), confirmations=1)

        async def balance() -> None:
            await self.ledger.balance(self.measured_tenant)

        async def statement() -> None:
            await self.ledger.statement(
                self.measured_tenant, since=self.day_start, until=self.day_start + timedelta(days=1)
            )

        async def webhook_claim() -> None:
            if await self.worker.run_once() < 1:
                raise RuntimeError("the booking's webhook delivery was not claimed")

        async def reconcile() -> None:
            report = await self.reconciler.run_once()
            if report.unresolved:
                raise RuntimeError(f"reconcile: {report.unresolved}")

        async def claim() -> None:
            key = ClaimKey(chain_id=chain_id, asset=self.settings.asset, payer=_PAYER, nonce=_nonce())
            made, inserted = await self.claims.claim(
                key,
                idempotency_key=None,
                payload_hash=secrets.token_hex(32),
                network=self.settings.network,
                pay_to=self.tenants.require(self.booking_tenant).pay_to,
                amount=10_000,
                valid_before=int(time.time()) + 600,
            )
            if not inserted:
                raise RuntimeError("a fresh authorization was not claimed")
            claimed.append(made.id)

        async def release() -> None:
            # Left claimed, it would be one more claim for every later reconcile pass to look at.
            await self.claims.release(claimed.pop())

        return [
            ("book", book, finalize),
            ("balance", balance, None),
            ("statement", statement, None),
            ("webhook claim", webhook_claim, None),
            ("reconcile", reconcile, None),
            ("claim", claim, release),
        ]


async def timed(operation: Step) -> float:
    """Seconds `operation` took."""
    started = time.perf_counter()
    await operation()
    return time.perf_counter() - started
