"""The merchant's record of what it accepted under each open payment mandate (§20.5 step 5), on SQLite
and PostgreSQL: reserve, confirm and release; a closed payment mandate counting once; the budget holding
across reservations, and on PostgreSQL across two reservations racing for it.

The mandates are the payer's own (tests/fixtures/ap2.py through `present_mandates`), accepted by
`verify_mandates` against an empty record, so that what refuses them is the reservation's own check.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.extension import Ap2ErrorCode, Ap2Mandates
from a2a_x402.merchant.ap2 import (
    AcceptedMandates,
    IssuerKeys,
    MandateRefused,
    MandateUsage,
    MandateUsageStore,
    Reservation,
    UseState,
    mandate_usage_metadata,
    verify_mandates,
)
from a2a_x402.payer import OpenMandates, present_mandates
from a2a_x402.storage import create_engine
from tests.fixtures.ap2 import MERCHANT, PRICE_CENTS, OpenTerms, issue_open_mandates, new_key, public_jwks
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.schema import migration_differences

from .test_verify import DECLARATION, Round

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

TENANT = "acme"
EARLIER = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


class Shopper:
    """A user's open mandates and the payments an agent makes under them, accepted by the merchant."""

    def __init__(self, *, now: int, **terms: Any) -> None:
        user_key = new_key("trusted-surface-test")
        self.issuers = IssuerKeys.from_jwks(public_jwks(user_key))
        self.opened: OpenMandates = issue_open_mandates(user_key, new_key(), OpenTerms(**terms), now=now)
        self.now = now
        self.presented: Ap2Mandates | None = None
        """The mandates of the last round `accepted`."""

    async def accepted(self) -> AcceptedMandates:
        """A new round paid under the open mandates, its mandates accepted against an empty record."""
        paid = Round(now=self.now)
        payload = paid.payment.to_json_dict()
        # A fresh copy of the payer's record each time (as if several agents held the mandates): the
        # payer's own budget check would otherwise refuse to present what the merchant must refuse.
        mandates = present_mandates(
            replace(self.opened), paid.checkout_jwt, payload, MERCHANT.id, paid.offer_id, now=self.now
        )

        self.presented = mandates

        async def empty(_key: str) -> MandateUsage:
            return MandateUsage()

        return await verify_mandates(
            DECLARATION,
            self.issuers,
            checkout_jwt=paid.checkout_jwt,
            payment=paid.payment,
            mandates=mandates,
            usage=empty,
            now=self.now,
        )


@pytest.fixture
def now() -> int:
    # The SDK stamps each closing hop's `iat` with the wall clock, so the rounds live at that time.
    return int(time.time())


@pytest.fixture(scope="module")
async def store(module_database_url: str) -> AsyncIterator[MandateUsageStore]:
    # One database for the module: each test pays under open mandates and for tasks of its own.
    engine = create_engine(module_database_url)
    try:
        yield MandateUsageStore(engine)
    finally:
        await engine.dispose()


def _tasks(count: int) -> list[str]:
    """Task ids no other test of the module uses."""
    return [f"task-{uuid.uuid4().hex}" for _ in range(count)]


async def _refused(says: str, call: Any) -> None:
    with pytest.raises(MandateRefused) as caught:
        await call
    assert caught.value.code is Ap2ErrorCode.INVALID_MANDATE, caught.value
    assert says in caught.value.detail


async def test_the_tables_are_those_the_migrations_make(module_database_url: str) -> None:
    assert await migration_differences(module_database_url, mandate_usage_metadata) == []


async def test_a_use_is_reserved_confirmed_or_released_and_counts_while_it_stands(
    store: MandateUsageStore, now: int
) -> None:
    task = _tasks(10)
    shopper = Shopper(now=now)
    settled, failed = await shopper.accepted(), await shopper.accepted()
    key = settled.open_mandate
    assert await store.usage(key) == MandateUsage()

    first = await store.reserve(settled, tenant=TENANT, task_id=task[1], round_=1, now=EARLIER)
    assert (first.state, first.amount, first.reference) == (
        UseState.RESERVED,
        PRICE_CENTS,
        settled.payment_reference,
    )
    assert (first.checkout_hash, first.open_mandate) == (settled.checkout_hash, key)
    later = EARLIER + timedelta(minutes=5)
    await store.reserve(failed, tenant=TENANT, task_id=task[2], round_=1, now=later)
    assert await store.usage(key) == MandateUsage(2 * PRICE_CENTS, 2, int(later.timestamp()))

    assert await store.confirm(task[1], 1)
    confirmed = await store.reservation(task[1], 1)
    assert confirmed is not None and confirmed.state is UseState.CONFIRMED
    assert confirmed.decided_at is not None
    assert not await store.confirm(task[1], 1)
    assert not await store.release(task[1], 1)  # a settled round's use stays

    assert await store.release(task[2], 1)
    assert await store.reservation(task[2], 1) is None
    assert not await store.release(task[2], 1)
    assert not await store.confirm(task[2], 1)  # released stays released
    # The failed payment no longer counts, and the last use is the settled one again.
    assert await store.usage(key) == MandateUsage(PRICE_CENTS, 1, int(EARLIER.timestamp()))
    assert not await store.confirm(task[9], 1)
    assert not await store.release(task[9], 1)


async def test_a_closed_payment_mandate_counts_once_and_only_for_its_round(
    store: MandateUsageStore, now: int
) -> None:
    task = _tasks(10)
    shopper = Shopper(now=now)
    accepted, released = await shopper.accepted(), await shopper.accepted()
    first = await store.reserve(accepted, tenant=TENANT, task_id=task[1], round_=1)

    # Presented again with its payment (T13): the same use, not counted again, before and after it settles.
    assert await store.reserve(accepted, tenant=TENANT, task_id=task[1], round_=1) == first
    await store.confirm(task[1], 1)
    again = await store.reserve(accepted, tenant=TENANT, task_id=task[1], round_=1)
    assert (again.reference, again.state) == (first.reference, UseState.CONFIRMED)
    assert await store.usage(accepted.open_mandate) == MandateUsage(
        PRICE_CENTS, 1, int(first.reserved_at.timestamp())
    )

    # Replayed for another task or round, or after its round ended with nothing settled: refused.
    await _refused("already used", store.reserve(accepted, tenant=TENANT, task_id=task[2], round_=1))
    await _refused("already used", store.reserve(accepted, tenant=TENANT, task_id=task[1], round_=2))
    await store.reserve(released, tenant=TENANT, task_id=task[3], round_=1)
    await store.release(task[3], 1)
    await _refused("already used", store.reserve(released, tenant=TENANT, task_id=task[3], round_=1))
    assert await store.usage(accepted.open_mandate) == MandateUsage(
        PRICE_CENTS, 1, int(first.reserved_at.timestamp())
    )


async def test_a_round_counts_one_payments_mandates(store: MandateUsageStore, now: int) -> None:
    """Two payments presented for one round (the merchant takes one of them): the second's mandates are
    refused while the first's count, and taken once the first's round use is released."""
    task = _tasks(10)
    first, second = await Shopper(now=now).accepted(), await Shopper(now=now).accepted()
    await store.reserve(first, tenant=TENANT, task_id=task[1], round_=1)

    await _refused(
        "already count for this round", store.reserve(second, tenant=TENANT, task_id=task[1], round_=1)
    )
    assert await store.usage(second.open_mandate) == MandateUsage()

    await store.release(task[1], 1)
    taken = await store.reserve(second, tenant=TENANT, task_id=task[1], round_=1)
    assert taken.reference == second.payment_reference


async def test_the_budget_holds_across_reservations(store: MandateUsageStore, now: int) -> None:
    task = _tasks(10)
    shopper = Shopper(now=now, budget=0.5)  # two payments of 25 cents
    payments = [await shopper.accepted() for _ in range(3)]
    for n, accepted in enumerate(payments[:2]):
        await store.reserve(accepted, tenant=TENANT, task_id=task[n], round_=1)

    await _refused("budget", store.reserve(payments[2], tenant=TENANT, task_id=task[2], round_=1))
    assert (await store.usage(payments[0].open_mandate)).total == 2 * PRICE_CENTS
    assert await store.reservation(task[2], 1) is None

    # A payment that failed gives its share back.
    await store.release(task[1], 1)
    await store.reserve(payments[2], tenant=TENANT, task_id=task[2], round_=1)
    assert (await store.usage(payments[0].open_mandate)).total == 2 * PRICE_CENTS


async def test_the_recurrence_holds_across_reservations(store: MandateUsageStore, now: int) -> None:
    task = _tasks(10)
    shopper = Shopper(now=now, max_occurrences=1)
    first, second = await shopper.accepted(), await shopper.accepted()
    await store.reserve(first, tenant=TENANT, task_id=task[1], round_=1)

    await _refused("occurrences", store.reserve(second, tenant=TENANT, task_id=task[2], round_=1))


async def test_of_two_reservations_at_once_that_the_budget_fits_one_only_one_is_taken(
    store: MandateUsageStore, now: int
) -> None:
    task = _tasks(10)
    shopper = Shopper(now=now, budget=0.3)
    one, other = await shopper.accepted(), await shopper.accepted()

    outcomes = await asyncio.gather(
        store.reserve(one, tenant=TENANT, task_id=task[1], round_=1),
        store.reserve(other, tenant=TENANT, task_id=task[2], round_=1),
        return_exceptions=True,
    )

    refused = [o for o in outcomes if isinstance(o, MandateRefused)]
    assert len(refused) == 1 and "budget" in refused[0].detail, outcomes
    assert await store.usage(one.open_mandate) == MandateUsage(PRICE_CENTS, 1, _taken_at(outcomes))


@pytest.mark.postgres
@pytest.mark.parametrize("module_database_url", ["postgres"], indirect=True)
async def test_a_reservation_that_read_the_record_holds_it_until_it_is_written(
    module_database_url: str, now: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving a check without the lock gets wrong, made to happen: one reservation has read the
    record and not yet written its use (it is held there, on a thread of its own) when the other comes.
    The other waits for it, then sees its use and is refused."""
    task = _tasks(3)
    shopper = Shopper(now=now, budget=0.5)
    before, holding, waiting = [await shopper.accepted() for _ in range(3)]
    engine = create_engine(module_database_url)
    store = MandateUsageStore(engine)
    await store.reserve(before, tenant=TENANT, task_id=task[0], round_=1)  # the record exists: 25 of 50
    has_read, resume = threading.Event(), threading.Event()
    check_usage = AcceptedMandates.check_usage

    def held_after_reading(accepted: AcceptedMandates, usage: MandateUsage) -> None:
        if accepted is holding:
            has_read.set()
            resume.wait(HANG_S)
        check_usage(accepted, usage)

    monkeypatch.setattr(AcceptedMandates, "check_usage", held_after_reading)

    async def reserve_holding() -> Reservation:
        # Its own event loop and engine: it stops inside a synchronous step, which would stop this loop.
        other = create_engine(module_database_url)
        try:
            return await MandateUsageStore(other).reserve(holding, tenant=TENANT, task_id=task[1], round_=1)
        finally:
            await other.dispose()

    first = asyncio.create_task(asyncio.to_thread(asyncio.run, reserve_holding()))
    try:
        await wait_until(has_read.is_set, what="the first reservation to read the record")
        second = asyncio.create_task(store.reserve(waiting, tenant=TENANT, task_id=task[2], round_=1))
        await wait_until(lambda: second.done() or _someone_waits(engine), what="the second reservation")
        assert not second.done()  # it waits for the first, which holds the record
        resume.set()
        assert (await first).reference == holding.payment_reference
        with pytest.raises(MandateRefused) as caught:
            await second
        assert "budget" in caught.value.detail
        assert (await store.usage(before.open_mandate)).total == 2 * PRICE_CENTS
    finally:
        resume.set()
        await asyncio.wait([first])
        await engine.dispose()


async def _someone_waits(engine: AsyncEngine) -> bool:
    """Whether a session of the database waits for a lock another one holds."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND cardinality(pg_blocking_pids(pid)) > 0"
    )
    async with engine.connect() as connection:
        return bool((await connection.execute(query)).scalar_one())


def _taken_at(outcomes: Sequence[object]) -> int:
    [taken] = [o for o in outcomes if isinstance(o, Reservation)]
    return int(taken.reserved_at.timestamp())
