"""A round's end decides its AP2 mandates' use in the transaction that changes the offer's state (§20.5),
whichever of the three ways the payment layer writes that change, on SQLite and PostgreSQL: an `advance` of
its own (recovery's failure, a metered round paid for 0), an `advance` with its webhook event (the executor's
failure and fresh terms), and `advance_in` inside the caller's transaction (the booking of a paid round).
Paid, the use is confirmed; failed, offered again or rejected, it is released and its amount taken off the
open mandate's record, as is any use of an earlier round whose payment was never taken, and the use of a
payment presented but never taken when the purge deletes its task left unpaid. A change that does not happen
decides nothing, and a transaction that rolls back takes the decision with it. Recovery failing an interrupted
turn releases it, and the status it writes carries the round's error receipts, which its evidence keeps.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value
from joserfc import jwt
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.extension import AP2_CHECKOUT_RECEIPT_KEY, AP2_PAYMENT_RECEIPT_KEY
from a2a_x402.facilitator import HttpFacilitatorClient, RpcClient
from a2a_x402.merchant.ap2 import (
    AcceptedMandates,
    Ap2EvidenceStore,
    MandateUsage,
    MandateUsageStore,
    UseState,
    mandate_reference,
)
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.payments import (
    OfferState,
    OfferStore,
    PaymentRecovery,
    UnpaidRules,
    UnpaidWork,
    round_ap2,
)
from a2a_x402.merchant.tenants import TenantRegistry
from a2a_x402.merchant.webhooks import EventType, Outbox
from a2a_x402.storage import write, write_transaction
from tests.fixtures.ap2 import PRICE_CENTS, new_key
from tests.merchant.ap2.shop import write_tenants
from tests.merchant.ap2.support import published

from .test_usage import Shopper

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

TENANT = "acme"
# Read by nothing here but the receipts, which name the round's offerId.
TERMS = {"x402Version": 2, "accepts": [{"extra": {"offerId": "offer-1"}}]}
# What the decision reads of the offer is only that its round had a checkout; the JWT is not read.
CHECKOUT = "header.claims.signature"
_USE_STATE = sa.text("SELECT state FROM ap2_mandate_uses WHERE task_id = :task_id")
_ROUND_STATES = sa.text("SELECT round, state FROM ap2_mandate_uses WHERE task_id = :task_id ORDER BY round")


class Rounds:
    """Offers taken for payment under one open mandate, each with its use reserved."""

    def __init__(self, engine: AsyncEngine, shopper: Shopper) -> None:
        self.usage = MandateUsageStore(engine)
        self.offers = OfferStore(engine, events=Outbox(engine), usage=self.usage)
        self.shopper = shopper
        self.open_mandate = ""

    async def presented(self, *, checkout: str | None = CHECKOUT, presented_with: str = "h") -> str:
        """A task offered with `checkout`, its use reserved by mandates presented with the payment
        `presented_with`, which is not taken yet."""
        task_id = f"task-{uuid.uuid4().hex}"
        assert await self.offers.offer(
            task_id=task_id,
            tenant=TENANT,
            context_id="ctx-1",
            skill="text-stats",
            dialect="v0.3",
            required=TERMS,
            request={"messageId": "m-1"},
            checkout_jwt=checkout,
        )
        accepted: AcceptedMandates = await self.shopper.accepted()
        self.open_mandate = accepted.open_mandate
        await self.usage.reserve(
            accepted, tenant=TENANT, task_id=task_id, round_=1, payment_hash=presented_with
        )
        return task_id

    async def taken(self, *, checkout: str | None = CHECKOUT, presented_with: str = "h") -> str:
        """A task whose payment `h` was taken (`working`), its use reserved by mandates presented with the
        payment `presented_with` (the same one, unless a test races two payments of one round)."""
        task_id = await self.presented(checkout=checkout, presented_with=presented_with)
        assert await self.offers.submit(
            task_id,
            round_=1,
            payer="0x" + "11" * 20,
            nonce="0x" + uuid.uuid4().hex,
            payload={},
            payload_hash="h",
            accepted={},
        )
        return task_id

    async def state(self, task_id: str) -> UseState:
        """Where the task's one use stands (released uses included, which no longer count)."""
        async with self.offers.engine.connect() as connection:
            state = (await connection.execute(_USE_STATE, {"task_id": task_id})).scalar_one()
        return UseState(state)

    async def counted(self) -> MandateUsage:
        return await self.usage.usage(self.open_mandate)


def _failed_event(task_id: str) -> dict[str, Any]:
    """The `settlement.failed` data the executor writes with fresh terms after a failed settlement."""
    return {
        "taskId": task_id,
        "contextId": "ctx-1",
        "payer": "0x" + "11" * 20,
        "payTo": "0x" + "22" * 20,
        "asset": "0x" + "33" * 20,
        "network": "eip155:84532",
        "amount": "100000",
        "transaction": None,
        "reason": "insufficient_funds",
        "occurredAt": "2026-12-05T10:00:00+00:00",
    }


@pytest.fixture
async def rounds(engine: AsyncEngine) -> Rounds:
    return Rounds(engine, Shopper(now=int(time.time())))


async def test_each_way_of_ending_a_round_decides_its_use_with_the_change(rounds: Rounds) -> None:
    failed, fresh, paid = [await rounds.taken() for _ in range(3)]
    assert (await rounds.counted()).total == 3 * PRICE_CENTS

    # Recovery's way: an advance of its own, no event.
    assert await rounds.offers.advance(failed, OfferState.FAILED, error="SETTLEMENT_FAILED")
    assert await rounds.state(failed) is UseState.RELEASED
    # The executor's fresh terms: an advance with its webhook event, in one transaction.
    event: tuple[EventType, dict[str, Any]] = (EventType.SETTLEMENT_FAILED, _failed_event(fresh))
    assert await rounds.offers.advance(fresh, OfferState.OFFERED, error="INSUFFICIENT_FUNDS", event=event)
    assert await rounds.state(fresh) is UseState.RELEASED
    # The booking's way: advance_in inside the caller's transaction.
    assert await rounds.offers.advance(paid, OfferState.SETTLING)
    assert await rounds.state(paid) is UseState.RESERVED  # settling decides nothing
    async with write_transaction(rounds.offers.engine) as connection:
        assert await rounds.offers.advance_in(connection, paid, OfferState.PAID, receipts=[])
    assert await rounds.state(paid) is UseState.CONFIRMED

    assert (await rounds.counted()).total == PRICE_CENTS  # only the paid round's use counts
    # A decided round is not decided again: the change does not happen, and nothing more is released.
    assert not await rounds.offers.advance(failed, OfferState.FAILED)
    assert (await rounds.counted()).total == PRICE_CENTS


async def test_a_round_that_took_another_payment_than_the_mandates_came_with_releases_their_use(
    rounds: Rounds,
) -> None:
    # Two payments presented for one round, the mandates with "other" and "h" taken: paying "h" must not
    # charge the mandates, nor name them in the books or the events.
    task_id = await rounds.taken(presented_with="other")
    assert await rounds.offers.advance(task_id, OfferState.SETTLING)
    async with write_transaction(rounds.offers.engine) as connection:
        assert await round_ap2(task_id, 1, "h")(connection) is None
        assert await round_ap2(task_id, 1, "other")(connection) is not None
        assert await rounds.offers.advance_in(connection, task_id, OfferState.PAID, receipts=[])
    assert await rounds.state(task_id) is UseState.RELEASED
    assert (await rounds.counted()).total == 0


async def test_a_change_that_does_not_happen_or_rolls_back_decides_nothing(rounds: Rounds) -> None:
    task_id = await rounds.taken()
    # Paid is reached from settling only: the offer does not move, and its use stays reserved.
    assert not await rounds.offers.advance(task_id, OfferState.PAID, receipts=[])
    assert await rounds.state(task_id) is UseState.RESERVED

    class Abandoned(Exception):
        pass

    assert await rounds.offers.advance(task_id, OfferState.SETTLING)
    with pytest.raises(Abandoned):
        async with write_transaction(rounds.offers.engine) as connection:
            assert await rounds.offers.advance_in(connection, task_id, OfferState.FAILED, error="x")
            raise Abandoned
    offer = await rounds.offers.get(task_id)
    assert offer is not None and offer.state is OfferState.SETTLING
    assert await rounds.state(task_id) is UseState.RESERVED
    assert (await rounds.counted()).total == PRICE_CENTS


async def test_a_rejection_releases_a_use_reserved_before_the_payment_was_taken(rounds: Rounds) -> None:
    # The mandates are reserved with the presentation, a moment before the payment is taken: a cancel
    # winning that moment ends the round with nothing settled.
    task_id = await rounds.presented()

    assert await rounds.offers.advance(task_id, OfferState.REJECTED)
    assert await rounds.state(task_id) is UseState.RELEASED
    assert await rounds.counted() == MandateUsage(total=0, uses=0, last_used=None)


async def test_an_offer_without_a_checkout_decides_nothing(rounds: Rounds) -> None:
    # A round offered without a checkout never reserves a use; one written by hand stays as it is.
    task_id = await rounds.taken(checkout=None)
    assert await rounds.offers.advance(task_id, OfferState.FAILED, error="x")
    assert await rounds.state(task_id) is UseState.RESERVED


async def test_recovery_failing_an_interrupted_turn_releases_its_use(
    rounds: Rounds, engine: AsyncEngine
) -> None:
    task_id = await rounds.taken()
    # Nothing of this pass asks the facilitator or the chain: a turn interrupted while working fails.
    facilitator = HttpFacilitatorClient("http://127.0.0.1:9")
    recovery = PaymentRecovery(
        offers=rounds.offers,
        facilitator=facilitator,
        ledger=Ledger(engine, Outbox(engine)),
        chain=RpcClient("http://127.0.0.1:9"),
        tasks=InMemoryTaskStore(),
        stale_after_s=0.0,
    )
    try:
        assert await recovery.finish_abandoned() == 1
    finally:
        await facilitator.aclose()
    offer = await rounds.offers.get(task_id)
    assert offer is not None and offer.state is OfferState.FAILED
    assert await rounds.state(task_id) is UseState.RELEASED
    assert (await rounds.counted()).total == 0


async def test_a_use_whose_payment_was_never_taken_is_released_when_a_later_round_is_paid(
    rounds: Rounds,
) -> None:
    # Round 1's mandates were reserved with their presentation, but the round was offered again before
    # the payment was taken: round 2 is paid, and round 1's use, which can never settle, stops counting.
    task_id = f"task-{uuid.uuid4().hex}"
    offer: dict[str, Any] = {
        "task_id": task_id,
        "tenant": TENANT,
        "context_id": "ctx-1",
        "skill": "text-stats",
        "dialect": "v0.3",
        "required": TERMS,
        "request": {},
        "checkout_jwt": CHECKOUT,
    }
    assert await rounds.offers.offer(**offer)
    stale = await rounds.shopper.accepted()
    rounds.open_mandate = stale.open_mandate
    await rounds.usage.reserve(stale, tenant=TENANT, task_id=task_id, round_=1)
    assert await rounds.offers.offer(**offer)  # round 2
    await rounds.usage.reserve(await rounds.shopper.accepted(), tenant=TENANT, task_id=task_id, round_=2)
    assert await rounds.offers.submit(
        task_id, round_=2, payer="0x" + "11" * 20, nonce="0x02", payload={}, payload_hash="h", accepted={}
    )
    assert (await rounds.counted()).total == 2 * PRICE_CENTS

    assert await rounds.offers.advance(task_id, OfferState.SETTLING)
    assert await rounds.offers.advance(task_id, OfferState.PAID, receipts=[])

    async with rounds.offers.engine.connect() as connection:
        states = (await connection.execute(_ROUND_STATES, {"task_id": task_id})).all()
    assert [tuple(row) for row in states] == [(1, "released"), (2, "confirmed")]
    assert (await rounds.counted()).total == PRICE_CENTS


async def test_a_use_whose_payment_was_never_taken_is_released_when_its_unpaid_task_is_purged(
    rounds: Rounds, engine: AsyncEngine, tmp_path: Path
) -> None:
    # The mandates were reserved with their presentation, and the payment was never taken (the client went
    # away): the round never ends, so only the purge of the unpaid task can give the budget back.
    abandoned = await rounds.presented()
    taken = await rounds.taken()  # being paid: neither purged nor released
    assert (await rounds.counted()).total == 2 * PRICE_CENTS
    unpaid = UnpaidWork(
        engine,
        tenants=TenantRegistry.from_toml(write_tenants(tmp_path, new_key("surface"))),
        defaults=UnpaidRules(max_awaiting=10, max_per_minute=10, retention_s=3600),
        offer_timeout_s=300,
        usage=rounds.usage,
    )

    assert (await unpaid.purge()).offers == 0  # within the retention
    assert await rounds.state(abandoned) is UseState.RESERVED
    assert (await unpaid.purge(now=datetime.now(UTC) + timedelta(seconds=3601))).offers == 1

    assert await rounds.state(abandoned) is UseState.RELEASED
    assert await rounds.state(taken) is UseState.RESERVED
    assert (await rounds.counted()).total == PRICE_CENTS
    assert (await rounds.counted()).uses == 1


async def test_the_status_recovery_ends_a_round_with_carries_its_error_receipts(
    rounds: Rounds, engine: AsyncEngine, tmp_path: Path
) -> None:
    tenants = TenantRegistry.from_toml(write_tenants(tmp_path, new_key("surface")))
    task_id = await rounds.taken()
    mandates = rounds.shopper.presented
    assert mandates is not None
    # The task as the payment message left it: the mandates part in its history, beside the payment.
    data = Value()
    data.struct_value.update(mandates.to_wire())
    message = Message(
        message_id="m-2",
        role=Role.ROLE_USER,
        task_id=task_id,
        parts=[Part(text="Here is my payment."), Part(data=data, media_type="application/json")],
    )
    status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
    task = Task(id=task_id, context_id="ctx-1", status=status, history=[message])
    tasks = InMemoryTaskStore()
    await tasks.save(task, ServerCallContext(tenant=TENANT))
    evidence = Ap2EvidenceStore(engine)

    def keep(connection: sa.Connection) -> None:  # as the presentation's write kept them
        evidence.keep_in(
            connection, tenant=TENANT, task_id=task_id, round_=1, checkout_jwt=CHECKOUT, mandates=mandates
        )

    await write(engine, keep)
    facilitator = HttpFacilitatorClient("http://127.0.0.1:9")
    recovery = PaymentRecovery(
        offers=rounds.offers,
        facilitator=facilitator,
        ledger=Ledger(engine, Outbox(engine)),
        chain=RpcClient("http://127.0.0.1:9"),
        tasks=tasks,
        stale_after_s=0.0,
        tenants=tenants,
        evidence=evidence,
    )
    try:
        assert await recovery.finish_abandoned() == 1
    finally:
        await facilitator.aclose()

    told = await tasks.get(task_id, ServerCallContext(tenant=TENANT))
    assert told is not None and told.status.state == TaskState.TASK_STATE_FAILED
    [receipts] = [MessageToDict(part.data) for part in told.status.message.parts if part.HasField("data")]
    ap2 = tenants.require(TENANT).ap2
    assert ap2 is not None
    keys = published(ap2.checkout_keys)
    checkout = jwt.decode(receipts[AP2_CHECKOUT_RECEIPT_KEY], keys, algorithms=["ES256"]).claims
    payment = jwt.decode(receipts[AP2_PAYMENT_RECEIPT_KEY], keys, algorithms=["ES256"]).claims
    assert checkout["reference"] == mandate_reference(mandates.checkout_mandate)
    assert payment["reference"] == mandate_reference(mandates.payment_mandate)
    assert (payment["status"], payment["error"]) == ("Error", "SETTLEMENT_FAILED")
    assert await rounds.state(task_id) is UseState.RELEASED
    kept = await evidence.evidence(task_id, 1)
    assert kept is not None
    assert (kept.checkout_receipt, kept.payment_receipt) == (
        receipts[AP2_CHECKOUT_RECEIPT_KEY],
        receipts[AP2_PAYMENT_RECEIPT_KEY],
    )
