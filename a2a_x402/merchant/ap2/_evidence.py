"""AP2's evidence of a round paid with mandates, kept for disputes (§20.6) and purged after its retention.

"Together, the checkout JWT, the mandates and the receipts are AP2's evidence in a dispute; a merchant
SHOULD keep them, as sent, for as long as a payment can be disputed." One row per round whose mandates
were accepted (table ``ap2_evidence``, migration m0017): the checkout JWT the round offered, the compact
closed checkout and payment mandates as presented (open mandates in front, when the user was not present),
and the AP2 receipts that end the round once they are signed.

The mandates are written in the transaction that records the payment's presentation and counts their use
(``keep_in``), so the evidence exists exactly when the use does; presented again for its round (T13), the
first presentation's stays. The receipts are added by whoever signs them (``add_receipts``): the payment
layer, with the status that ends the round (the executor, and recovery for a round it ends), before that
status goes out.

The tokens are credentials (a presented mandate is proof of the user's authorization) and personal data
(their disclosures): this module never logs them, ``Ap2Evidence`` leaves them out of its ``repr``, and
nothing else in the merchant reads them; the books and the webhooks name the mandates by their hashes only.
Rows older than the retention (``X402_AP2_EVIDENCE_DAYS``) are deleted by ``purge``, which ``run`` repeats
beside the purge of unpaid tasks.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.extension import Ap2Mandates
from a2a_x402.storage import UtcDateTime, write, write_transaction

__all__ = ["Ap2Evidence", "Ap2EvidenceStore", "ap2_evidence_metadata"]

logger = logging.getLogger(__name__)

ap2_evidence_metadata = sa.MetaData()
"""The table of this module, for comparing it with the migrations."""

evidence_table = sa.Table(
    "ap2_evidence",
    ap2_evidence_metadata,
    sa.Column("task_id", sa.String(64), primary_key=True),
    sa.Column("round", sa.Integer, primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("checkout_jwt", sa.Text, nullable=False),
    sa.Column("checkout_mandate", sa.Text, nullable=False),
    sa.Column("payment_mandate", sa.Text, nullable=False),
    sa.Column("checkout_receipt", sa.Text, nullable=True),
    sa.Column("payment_receipt", sa.Text, nullable=True),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Index("ix_ap2_evidence_created_at", "created_at"),
)

_ROUND = sa.and_(
    evidence_table.c.task_id == sa.bindparam("_task_id"), evidence_table.c.round == sa.bindparam("_round")
)
_READ = sa.select(evidence_table).where(_ROUND)
_RECEIPTS = (
    sa.update(evidence_table)
    .where(_ROUND)
    .values(checkout_receipt=sa.bindparam("_checkout"), payment_receipt=sa.bindparam("_payment"))
)


@dataclass(frozen=True, slots=True)
class Ap2Evidence:
    """One round's evidence. The tokens are left out of ``repr``: they are credentials and personal data.

    Attributes:
        tenant, task_id, round: the round paid.
        checkout_jwt: the checkout the round offered (§20.3).
        checkout_mandate, payment_mandate: the compact closed mandates as presented (§20.4).
        checkout_receipt, payment_receipt: the AP2 receipts that ended the round (§20.6), once added.
        created_at: when the mandates were accepted; the retention runs from it.
    """

    tenant: str
    task_id: str
    round: int
    checkout_jwt: str = field(repr=False)
    checkout_mandate: str = field(repr=False)
    payment_mandate: str = field(repr=False)
    checkout_receipt: str | None = field(repr=False)
    payment_receipt: str | None = field(repr=False)
    created_at: datetime


class Ap2EvidenceStore:
    """The evidence of rounds paid with AP2 mandates in ``engine``, kept ``days`` (see the module)."""

    def __init__(self, engine: AsyncEngine, *, days: int = 400) -> None:
        if days < 1:
            raise ValueError(f"days: the evidence is kept at least a day, got {days}")
        self._engine = engine
        self._retention = timedelta(days=days)

    @staticmethod
    def keep_in(
        connection: sa.Connection,
        *,
        tenant: str,
        task_id: str,
        round_: int,
        checkout_jwt: str,
        mandates: Ap2Mandates,
        now: datetime | None = None,
    ) -> None:
        """Keep round ``round_`` of ``task_id``'s checkout and accepted ``mandates`` inside the caller's
        write on ``connection`` (the presentation's). A round's first evidence stays: the same mandates
        presented again for it (T13) add nothing."""
        insert = (postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert)(
            evidence_table
        )
        values: dict[str, Any] = {
            "task_id": task_id,
            "round": round_,
            "tenant": tenant,
            "checkout_jwt": checkout_jwt,
            "checkout_mandate": mandates.checkout_mandate,
            "payment_mandate": mandates.payment_mandate,
            "checkout_receipt": None,
            "payment_receipt": None,
            "created_at": now or datetime.now(UTC),
        }
        connection.execute(insert.on_conflict_do_nothing(index_elements=["task_id", "round"]), values)

    async def add_receipts(
        self, task_id: str, round_: int, *, checkout_receipt: str, payment_receipt: str
    ) -> bool:
        """Add the AP2 receipts that ended round ``round_`` of ``task_id`` (§20.6) to its evidence, for the
        signer of the receipts to call. Whether the round has evidence (a round paid without mandates has
        none, nor one already purged)."""

        def operation(connection: sa.Connection) -> bool:
            changes = {
                "_task_id": task_id,
                "_round": round_,
                "_checkout": checkout_receipt,
                "_payment": payment_receipt,
            }
            return bool(connection.execute(_RECEIPTS, changes).rowcount == 1)

        # Isolated: a failure here (it never fails the paid turn) must not fail the writes queued beside it.
        return await write(self._engine, operation, isolated=True)

    async def evidence(self, task_id: str, round_: int) -> Ap2Evidence | None:
        """Round ``round_`` of ``task_id``'s evidence, if it was paid with mandates and is not purged."""
        async with self._engine.connect() as connection:
            row = (await connection.execute(_READ, {"_task_id": task_id, "_round": round_})).first()
        return None if row is None else Ap2Evidence(**row._mapping)

    async def purge(self, *, now: datetime | None = None) -> int:
        """Delete the evidence older than the retention; how many rounds' was deleted."""
        cutoff = (now or datetime.now(UTC)) - self._retention
        async with write_transaction(self._engine) as connection:
            result = await connection.execute(
                sa.delete(evidence_table).where(evidence_table.c.created_at < cutoff)
            )
        return int(result.rowcount)

    async def run(self, stop: asyncio.Event, *, interval_s: float) -> None:
        """Purge every ``interval_s`` until ``stop`` is set; a failed pass is logged and the next one runs."""
        while not stop.is_set():
            try:
                purged = await self.purge()
            except Exception:
                logger.exception("purging AP2 evidence failed; retrying in %.0f s", interval_s)
            else:
                if purged:
                    logger.info("purged the AP2 evidence of %d rounds past its retention", purged)
            try:
                await asyncio.wait_for(stop.wait(), interval_s)
            except TimeoutError:
                continue
