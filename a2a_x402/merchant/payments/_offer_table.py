"""The `payment_offers` table and its rows: the columns, the partial indexes recovery reads by (their
predicates, which the store's queries use verbatim), the states an offer is in and a row read as an `Offer`.

How an offer moves between its states, and who may move it, is the store's (`_offers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from a2a_x402.storage import UtcDateTime

__all__ = ["UNBOOKED", "UNFINISHED", "UNTOLD", "Offer", "OfferState", "metadata", "offer_of", "offers_table"]

metadata = sa.MetaData()

# What recovery looks for, each with a partial index of its own that stays as small as the work left (an
# index on the state alone would cover every offer ever paid). The predicates are used verbatim by the
# queries: SQLite uses a partial index only for a WHERE clause that implies its predicate as written.
UNFINISHED = "state IN ('working', 'settling')"
UNBOOKED = "state = 'paid' AND booked_at IS NULL"
UNTOLD = "state IN ('paid', 'failed', 'rejected') AND told_at IS NULL"

offers_table = sa.Table(
    "payment_offers",
    metadata,
    sa.Column("task_id", sa.String(64), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("context_id", sa.String(64), nullable=False),
    sa.Column("skill", sa.String(128), nullable=False),
    sa.Column("dialect", sa.String(8), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("round", sa.Integer, nullable=False),
    sa.Column("required", sa.JSON, nullable=False),
    sa.Column("request", sa.JSON, nullable=False),
    sa.Column("payer", sa.String(42), nullable=True),
    sa.Column("nonce", sa.String(66), nullable=True),
    sa.Column("payload", sa.JSON, nullable=True),
    sa.Column("payload_hash", sa.String(64), nullable=True),
    sa.Column("accepted", sa.JSON, nullable=True),
    sa.Column("receipts", sa.JSON, nullable=False),
    sa.Column("held_artifacts", sa.JSON, nullable=True),
    # A metered task's usage (`PaymentUsage.to_wire`), stored when its work is done, before it is settled:
    # recovery settles the same amount.
    sa.Column("usage", sa.JSON, nullable=True),
    sa.Column("error", sa.String(32), nullable=True),
    # The round's checkout JWT (§20.3) when its tenant offers the embedded flow and the terms pass the
    # price rule: the round's mandates must name exactly it.
    sa.Column("checkout_jwt", sa.Text, nullable=True),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    # When the current round's payment was taken: only a transaction mined since may settle it for us.
    sa.Column("taken_at", UtcDateTime(), nullable=True),
    # Set in the transaction that books the settlement; a paid offer without it is the reconciler's to book.
    sa.Column("booked_at", UtcDateTime(), nullable=True),
    # Set in the transaction that stores the task's final state when that state tells the offer's outcome
    # (`TOLD_BY`): a decided offer without it has a task that never heard the outcome (the process stopped
    # between the two writes, or the SDK ended the task otherwise), for recovery to tell.
    sa.Column("told_at", UtcDateTime(), nullable=True),
    sa.UniqueConstraint("payer", "nonce", name="uq_payment_offers_authorization"),
    sa.Index(
        "ix_payment_offers_unfinished",
        "updated_at",
        postgresql_where=sa.text(UNFINISHED),
        sqlite_where=sa.text(UNFINISHED),
    ),
    sa.Index(
        "ix_payment_offers_unbooked",
        "task_id",
        postgresql_where=sa.text(UNBOOKED),
        sqlite_where=sa.text(UNBOOKED),
    ),
    sa.Index(
        "ix_payment_offers_untold",
        "updated_at",
        postgresql_where=sa.text(UNTOLD),
        sqlite_where=sa.text(UNTOLD),
    ),
)


class OfferState(StrEnum):
    """Where a task's payment stands; see `_offers` for how it moves."""

    OFFERED = "offered"
    WORKING = "working"
    SETTLING = "settling"
    PAID = "paid"
    FAILED = "failed"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class Offer:
    """A row of `payment_offers`."""

    task_id: str
    tenant: str
    context_id: str
    skill: str
    dialect: str
    state: OfferState
    round: int
    required: dict[str, Any]
    request: dict[str, Any]
    payer: str | None
    nonce: str | None
    payload: dict[str, Any] | None
    payload_hash: str | None
    accepted: dict[str, Any] | None
    receipts: list[dict[str, Any]]
    held_artifacts: list[dict[str, Any]] | None
    usage: dict[str, Any] | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    taken_at: datetime | None
    booked_at: datetime | None
    told_at: datetime | None
    checkout_jwt: str | None = None


def offer_of(row: sa.Row[Any]) -> Offer:
    """The `Offer` a row of `payment_offers` holds."""
    values = dict(row._mapping)
    values["state"] = OfferState(values["state"])
    return Offer(**values)
