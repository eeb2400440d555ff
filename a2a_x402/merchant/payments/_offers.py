"""Payment offers: the terms a task was offered and what became of its payment, durably.

One row per priced task. The offered x402 `PaymentRequired` lives here, not in process memory, so any
replica (or a restarted process) can check a submitted payment against exactly what this task was
offered; the row then records the authorization submitted, each settlement receipt (the task's complete
receipt history), and the held artifacts of work done but not yet paid for.

States::

    offered ──► working ──► settling ──► paid
       ▲           │           │
       └── (fresh terms after a retryable failure)
                   └───────────┴──► failed
    offered ──► rejected   (the client's payment-rejected, or CancelTask)

`working`: a payment was taken for the current terms; it is verified, then the work runs on it.
`settling`: the work is done (its artifacts held here, and a metered task's usage) and the payment is being
settled.
Every change of state is a compare-and-set on the state it comes from: a rejection or cancel racing a
payment wins only while the offer is `offered`, before anything is verified, or changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from a2a.types import TaskState
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from a2a_x402.extension import PaymentSubmittedData
from a2a_x402.storage import write, write_transaction

from ..webhooks import EventType, Outbox
from ._ap2_books import ap2_event_data, round_ap2
from ._offer_table import UNBOOKED, UNFINISHED, UNTOLD, Offer, OfferState, offer_of, offers_table

if TYPE_CHECKING:
    from ..ap2 import MandateUsageStore

__all__ = ["CHECKED_OFFER_KEY", "CheckedOffer", "OfferStore"]

CHECKED_OFFER_KEY = "x402_checked_offer"
"""The `ServerCallContext.state` key under which the request handler leaves the `CheckedOffer` a payment
was checked against, so the executor of the same request need not read the offer again."""

_REACHED_FROM: dict[OfferState, tuple[OfferState, ...]] = {
    OfferState.SETTLING: (OfferState.WORKING, OfferState.SETTLING),
    OfferState.PAID: (OfferState.SETTLING,),
    OfferState.FAILED: (OfferState.WORKING, OfferState.SETTLING),
    OfferState.OFFERED: (OfferState.WORKING, OfferState.SETTLING),
    OfferState.REJECTED: (OfferState.OFFERED,),
}
"""The states each state is reached from by `advance` (`working` is reached by `submit`): every change of
state is a compare-and-set on them, so a payment being taken or decided is never rejected or canceled,
and a decided one never changes again, whoever races for it."""
TOLD_BY = {
    OfferState.PAID: TaskState.TASK_STATE_COMPLETED,
    OfferState.FAILED: TaskState.TASK_STATE_FAILED,
    OfferState.REJECTED: TaskState.TASK_STATE_CANCELED,
}
"""The final task state that tells each decided outcome."""
_OUTCOME_TOLD_BY = {state: outcome for outcome, state in TOLD_BY.items()}
_ENDS_ROUND = {
    OfferState.PAID: True,
    OfferState.FAILED: False,
    OfferState.OFFERED: False,
    OfferState.REJECTED: False,
}
"""The states that end a round, and whether the round settled: its AP2 mandates' use (§20.5) is confirmed
or released in the transaction that moves the offer there."""


@dataclass(frozen=True, slots=True)
class CheckedOffer:
    """The offer a payment was checked against, the id of the task's status message at that moment, and
    the payment as the client sent it: the message the task stores has lost its signature by then."""

    offer: Offer
    status_id: str
    payment: PaymentSubmittedData


def _now() -> datetime:
    return datetime.now(UTC)


# Read on every payment message: built once, the values given per call.
_BY_TASK = sa.select(offers_table).where(offers_table.c.task_id == sa.bindparam("_task_id"))
_BY_AUTHORIZATION = sa.select(offers_table).where(
    offers_table.c.payer == sa.bindparam("_payer"), offers_table.c.nonce == sa.bindparam("_nonce")
)
# A payment message is checked against its task's offer and the offer its authorization was taken for.
_FOR_PAYMENT = sa.select(offers_table).where(
    sa.or_(
        offers_table.c.task_id == sa.bindparam("_task_id"),
        sa.and_(
            offers_table.c.payer == sa.bindparam("_payer"), offers_table.c.nonce == sa.bindparam("_nonce")
        ),
    )
)
# Every write of a paid task's turn, built once too: the columns to set come as the call's values (an
# UPDATE without `.values()` sets the columns its parameters name), and each set of columns is compiled
# once. Building and cache-keying these per call cost more CPU than the ledger's booking statement.
_UPDATE = offers_table.update().where(offers_table.c.task_id == sa.bindparam("_task_id"))
_ADVANCE = _UPDATE.where(offers_table.c.state.in_(sa.bindparam("_from", expanding=True)))
# Whether the round had a checkout, as the length of its JWT (NULL without one): SQLite 3.40 answers
# `checkout_jwt IS NOT NULL` wrongly in a RETURNING clause (true for a NULL), `length` rightly.
_ADVANCE_RETURNING = _ADVANCE.returning(
    offers_table.c.tenant,
    offers_table.c.round,
    offers_table.c.payload_hash,
    sa.func.length(offers_table.c.checkout_jwt).label("checkout"),
)
_SUBMIT = offers_table.update().where(
    offers_table.c.task_id == sa.bindparam("_task_id"),
    offers_table.c.round == sa.bindparam("_round"),
    offers_table.c.state == OfferState.OFFERED.value,
)
_TOLD = offers_table.update().where(
    offers_table.c.task_id == sa.bindparam("_task_id"),
    offers_table.c.state == sa.bindparam("_outcome"),
    offers_table.c.told_at.is_(None),
)


_SETTABLE = frozenset(offers_table.c.keys()) - {"task_id", "state", "updated_at"}


def _changes(task_id: str, state: OfferState, values: dict[str, Any]) -> dict[str, Any]:
    """The parameters of `_ADVANCE` moving the task's offer to `state` with `values`, from the states
    `state` is reached from.

    A statement built once sets whatever columns its parameters name and ignores any other name, so a
    name that is not a column the caller may set is refused here rather than silently not written.
    """
    if unknown := values.keys() - _SETTABLE:
        raise TypeError(f"not a settable column of payment_offers: {', '.join(sorted(unknown))}")
    reached_from = [previous.value for previous in _REACHED_FROM[state]]
    return {"_task_id": task_id, "_from": reached_from, **values, "state": state.value, "updated_at": _now()}


class OfferStore:
    """Reads and advances payment offers; every change is one short transaction.

    With `usage`, a change that ends a round offered with an AP2 checkout also decides the use its
    mandates reserved (`MandateUsageStore.decide_in`), in the same transaction: confirmed when the round
    is paid, released when it failed, was offered again or rejected.
    """

    def __init__(
        self, engine: AsyncEngine, events: Outbox | None = None, usage: MandateUsageStore | None = None
    ):
        self._engine = engine
        self._events = events
        self._usage = usage
        postgres = engine.dialect.name == "postgresql"
        # On PostgreSQL a write of one statement is its own transaction, in autocommit: no BEGIN and COMMIT
        # round trips around it (three of a paid turn's writes are one statement).
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT") if postgres else None
        # Built once, the values coming with each call: terms offered again start the next round.
        insert = (postgresql.insert if postgres else sqlite.insert)(offers_table)
        self._offer = insert.on_conflict_do_update(
            index_elements=[offers_table.c.task_id],
            set_={
                "state": insert.excluded.state,
                "round": offers_table.c.round + 1,
                "required": insert.excluded.required,
                "checkout_jwt": insert.excluded.checkout_jwt,
                "payer": None,
                "nonce": None,
                "payload": None,
                "payload_hash": None,
                "accepted": None,
                "held_artifacts": None,
                "usage": None,
                "taken_at": None,
                "updated_at": insert.excluded.updated_at,
            },
            # Terms replace only terms: an offer whose payment is taken or decided keeps its record.
            where=offers_table.c.state == OfferState.OFFERED.value,
        )

    @property
    def engine(self) -> AsyncEngine:
        """The merchant's database."""
        return self._engine

    @property
    def usage(self) -> MandateUsageStore | None:
        """The AP2 mandates' usage record its changes of state decide, if any."""
        return self._usage

    async def offer(
        self,
        *,
        task_id: str,
        tenant: str,
        context_id: str,
        skill: str,
        dialect: str,
        required: dict[str, Any],
        request: dict[str, Any],
        checkout_jwt: str | None = None,
    ) -> bool:
        """Record the terms offered for a task (or fresh terms replacing earlier ones, in the next round).

        `request` is the client message that asked for the paid work; the work runs on it once paid.
        `checkout_jwt` is the round's AP2 checkout, when the terms are offered with one (§20.3). One
        statement: a task offered terms before gets its next round. Returns False, changing nothing, when
        the task's offer is no longer open (its payment is being taken or was decided).
        """
        now = _now()
        values = {
            "task_id": task_id,
            "tenant": tenant,
            "context_id": context_id,
            "skill": skill,
            "dialect": dialect,
            "state": OfferState.OFFERED.value,
            "round": 1,
            "required": required,
            "request": request,
            "receipts": [],
            "checkout_jwt": checkout_jwt,
            "created_at": now,
            "updated_at": now,
        }
        return await self._write_one(self._offer, values) == 1

    async def get(self, task_id: str) -> Offer | None:
        """The offer of a task."""
        async with self._engine.connect() as connection:
            row = (await connection.execute(_BY_TASK, {"_task_id": task_id})).first()
        return offer_of(row) if row is not None else None

    async def by_authorization(self, payer: str, nonce: str) -> Offer | None:
        """The offer that an authorization was submitted for, if any."""
        async with self._engine.connect() as connection:
            row = (await connection.execute(_BY_AUTHORIZATION, {"_payer": payer, "_nonce": nonce})).first()
        return offer_of(row) if row is not None else None

    async def for_payment(self, task_id: str, payer: str, nonce: str) -> tuple[Offer | None, Offer | None]:
        """The offer of a task and the offer an authorization was submitted for (`get` and
        `by_authorization`), in one read: the two a payment message is checked against."""
        values = {"_task_id": task_id, "_payer": payer, "_nonce": nonce}
        async with self._engine.connect() as connection:
            offers = [offer_of(row) for row in (await connection.execute(_FOR_PAYMENT, values)).all()]
        own = next((offer for offer in offers if offer.task_id == task_id), None)
        used = next((offer for offer in offers if offer.payer == payer and offer.nonce == nonce), None)
        return own, used

    async def submit(
        self,
        task_id: str,
        *,
        round_: int,
        payer: str,
        nonce: str,
        payload: dict[str, Any],
        payload_hash: str,
        accepted: dict[str, Any],
    ) -> datetime | None:
        """Take a submitted payment for the task's current offer: the moment it was taken (stored as the
        offer's `taken_at`), or None if the offer is no longer open.

        The unique index on (payer, nonce) makes an authorization usable for one task only, even when two
        tasks race to use it.
        """
        taken_at = _now()
        values = {
            "_task_id": task_id,
            "_round": round_,
            "state": OfferState.WORKING.value,
            "payer": payer,
            "nonce": nonce,
            "payload": payload,
            "payload_hash": payload_hash,
            "accepted": accepted,
            "taken_at": taken_at,
            "updated_at": taken_at,
        }
        try:
            taken = await self._write_one(_SUBMIT, values) == 1
        except IntegrityError:
            return None
        return taken_at if taken else None

    async def advance(
        self,
        task_id: str,
        state: OfferState,
        *,
        event: tuple[EventType, dict[str, Any]] | None = None,
        **values: Any,
    ) -> bool:
        """Move the offer to `state`, recording `values` (receipts, held artifacts, error), if it is in a
        state `state` is reached from (`_REACHED_FROM`): whether it moved. An offer that did not move
        was moved by someone else first (a rejection, a cancel, another replica's recovery); its state
        says what happened.

        `event` (a billing webhook event type and its data) is written to the outbox in the same
        transaction, only if the offer moved, so the change and its notification are never separated by a
        crash. A round paid with AP2 mandates adds their references to it (`ap2`).
        """
        if event is None or self._events is None:
            changes = _changes(task_id, state, values)
            if self._usage is None or state not in _ENDS_ROUND:
                return await self._write_one(_ADVANCE, changes) == 1
            deciding = partial(self._advance_deciding, changes=changes, state=state)
            return await write(self._engine, deciding, isolated=True) is not None
        async with write_transaction(self._engine) as connection:
            return await self.advance_in(connection, task_id, state, event=event, **values)

    async def advance_in(
        self,
        connection: AsyncConnection,
        task_id: str,
        state: OfferState,
        *,
        event: tuple[EventType, dict[str, Any]] | None = None,
        **values: Any,
    ) -> bool:
        """`advance` inside the caller's transaction on `connection` (a booking's, say)."""
        changes = _changes(task_id, state, values)
        deciding = self._usage is not None and state in _ENDS_ROUND
        telling = event is not None and self._events is not None
        if not deciding and not telling:
            return (await connection.execute(_ADVANCE, changes)).rowcount == 1
        moved = (await connection.execute(_ADVANCE_RETURNING, changes)).first()
        if moved is None:
            return False
        # A round paid with AP2 mandates is named by them in its events, as its journal entry is: read before
        # the end of the round releases its use.
        taken = moved.payload_hash
        references = (
            await round_ap2(task_id, moved.round, taken)(connection) if telling and moved.checkout else None
        )
        if deciding and moved.checkout:
            await connection.run_sync(self._decide, task_id, moved.round, state, taken)
        if event is not None and self._events is not None:
            data = event[1] if references is None else {**event[1], "ap2": ap2_event_data(references)}
            await self._events.record_event(connection, str(moved.tenant), event[0], data)
        return True

    def _advance_deciding(
        self, connection: sa.Connection, changes: dict[str, Any], state: OfferState
    ) -> str | None:
        """Move the offer (`changes`) to `state`, a state that ends its round, and decide the use of the
        round's mandates on the same `connection`: the offer's tenant, or None if it did not move."""
        moved = connection.execute(_ADVANCE_RETURNING, changes).first()
        if moved is None:
            return None
        if moved.checkout:
            self._decide(connection, changes["_task_id"], moved.round, state, moved.payload_hash)
        return str(moved.tenant)

    def _decide(
        self, connection: sa.Connection, task_id: str, round_: int, state: OfferState, taken: str | None
    ) -> None:
        """Confirm or release the use of round `round_`'s mandates, which `state` ends, on `connection`:
        confirmed only when the payment taken (`taken`, its `payload_hash`) is the one they came with."""
        if self._usage is not None:
            settled = _ENDS_ROUND[state]
            self._usage.decide_in(connection, task_id, round_, settled=settled, payment_hash=taken)

    async def mark_booked(self, connection: AsyncConnection, task_id: str) -> None:
        """Record, in the booking's transaction on `connection`, that the task's settlement is booked."""
        await connection.execute(_UPDATE, {"_task_id": task_id, "booked_at": _now()})

    async def touch(self, task_id: str) -> None:
        """Mark the offer as still looked after (its owner is alive and waiting on it)."""
        await self._write_one(_UPDATE, {"_task_id": task_id, "updated_at": _now()})

    async def _write_one(self, statement: sa.Executable, values: dict[str, Any]) -> int:
        """Run one write statement committed on its own; the number of rows it changed.

        On PostgreSQL it runs in autocommit; on SQLite it joins the writer's group, in a savepoint of its
        own so a failing write (a unique constraint, say) fails alone.
        """
        if self._autocommit is not None:
            async with self._autocommit.connect() as connection:
                return (await connection.execute(statement, values)).rowcount
        return await write(self._engine, _rows_changed(statement, values), isolated=True)

    async def told_in(self, connection: AsyncConnection, task_id: str, final_state: TaskState) -> None:
        """Record, in the transaction on `connection` that stores the task's `final_state`, that the task
        was told how its payment was decided: only if that state tells the offer's outcome (`TOLD_BY`)."""
        outcome = _OUTCOME_TOLD_BY.get(final_state)
        if outcome is None:
            return
        await connection.execute(_TOLD, {"_task_id": task_id, "_outcome": outcome.value, "told_at": _now()})

    async def told(self, task_id: str, final_state: TaskState) -> None:
        """`told_in` in a transaction of its own."""
        async with write_transaction(self._engine) as connection:
            await self.told_in(connection, task_id, final_state)

    async def untold(self, before: datetime) -> list[Offer]:
        """Offers decided before `before` whose task was never told: what recovery tells."""
        statement = sa.select(offers_table).where(sa.text(UNTOLD), offers_table.c.updated_at < before)
        async with self._engine.connect() as connection:
            return [offer_of(r) for r in (await connection.execute(statement)).all()]

    async def unbooked(self) -> list[Offer]:
        """Paid offers not marked booked (their booking failed): what the reconciler books."""
        statement = sa.select(offers_table).where(sa.text(UNBOOKED)).order_by(offers_table.c.task_id)
        async with self._engine.connect() as connection:
            return [offer_of(r) for r in (await connection.execute(statement)).all()]

    async def unfinished(self) -> list[Offer]:
        """Offers whose payment was taken but not yet settled: what a restart or reconciler must finish."""
        statement = sa.select(offers_table).where(sa.text(UNFINISHED))
        async with self._engine.connect() as connection:
            return [offer_of(r) for r in (await connection.execute(statement)).all()]

    async def unfinished_counts(self) -> dict[OfferState, int]:
        """How many taken payments are `working` (the paid work runs) and `settling` (not settled yet)."""
        statement = (
            sa.select(offers_table.c.state, sa.func.count())
            .where(sa.text(UNFINISHED))
            .group_by(offers_table.c.state)
        )
        async with self._engine.connect() as connection:
            counts = {OfferState(state): int(n) for state, n in (await connection.execute(statement)).all()}
        return {state: counts.get(state, 0) for state in (OfferState.WORKING, OfferState.SETTLING)}


def _rows_changed(
    statement: sa.Executable, values: dict[str, Any] | None = None
) -> Callable[[sa.Connection], int]:
    """A write (`storage.write`) running `statement`: the rows it changed."""
    return lambda connection: connection.execute(statement, values).rowcount
