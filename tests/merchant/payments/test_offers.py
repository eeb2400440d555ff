"""The offer store's guards: terms never replace a payment being taken or decided, and an offer is marked
told only by the final task state that tells its outcome."""

from __future__ import annotations

import asyncio
from datetime import UTC
from typing import Any

import pytest
from a2a.types import TaskState
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.payments import OfferState, OfferStore

TERMS = {"x402Version": 2, "accepts": []}


async def _offer(store: OfferStore, task_id: str = "task-1") -> bool:
    return await store.offer(
        task_id=task_id,
        tenant="",
        context_id="ctx-1",
        skill="text-stats",
        dialect="v0.3",
        required=TERMS,
        request={"messageId": "m-1"},
    )


async def _take(store: OfferStore, task_id: str = "task-1", nonce: str = "0x01") -> None:
    assert await store.submit(
        task_id, round_=1, payer="0xPayer", nonce=nonce, payload={}, payload_hash="h", accepted={}
    )


async def test_fresh_terms_replace_open_terms_only(engine: AsyncEngine) -> None:
    store = OfferStore(engine)
    assert await _offer(store)
    assert await _offer(store)  # fresh terms: the next round
    assert await store.submit(
        "task-1", round_=2, payer="0xPayer", nonce="0x01", payload={}, payload_hash="h", accepted={}
    )

    assert not await _offer(store)  # the payment is being taken: the terms stay

    offer = await store.get("task-1")
    assert offer is not None
    assert (offer.state, offer.round, offer.payer, offer.nonce) == (
        OfferState.WORKING,
        2,
        "0xPayer",
        "0x01",
    )


async def test_the_moment_a_payment_was_taken_is_kept_until_fresh_terms_come(engine: AsyncEngine) -> None:
    store = OfferStore(engine)
    await _offer(store)
    taken_at = await store.submit(
        "task-1", round_=1, payer="0xPayer", nonce="0x01", payload={}, payload_hash="h", accepted={}
    )
    await store.advance("task-1", OfferState.SETTLING)
    settling = await store.get("task-1")

    await store.advance("task-1", OfferState.OFFERED)  # a retryable failure: fresh terms follow
    await _offer(store)
    offered_again = await store.get("task-1")

    assert taken_at is not None and taken_at.tzinfo is UTC
    assert settling is not None and settling.taken_at == taken_at  # read back as aware UTC on every backend
    assert offered_again is not None and (offered_again.round, offered_again.taken_at) == (2, None)


async def test_an_offer_is_told_only_by_the_state_that_tells_its_outcome(engine: AsyncEngine) -> None:
    store = OfferStore(engine)
    await _offer(store)
    await _take(store)
    assert await store.advance("task-1", OfferState.SETTLING)
    assert await store.advance("task-1", OfferState.PAID, receipts=[])

    await store.told("task-1", TaskState.TASK_STATE_FAILED)  # the SDK failed the task: not told
    await store.told("task-1", TaskState.TASK_STATE_WORKING)
    offer = await store.get("task-1")
    assert offer is not None and offer.told_at is None

    await store.told("task-1", TaskState.TASK_STATE_COMPLETED)
    offer = await store.get("task-1")
    assert offer is not None and offer.told_at is not None


async def test_a_payment_reads_its_task_offer_and_the_offer_its_authorization_was_taken_for(
    engine: AsyncEngine,
) -> None:
    store = OfferStore(engine)
    await _offer(store, "task-1")
    await _offer(store, "task-2")
    assert await store.submit(
        "task-1", round_=1, payer="0xPayer", nonce="0x01", payload={}, payload_hash="h", accepted={}
    )

    own, used = await store.for_payment("task-2", "0xPayer", "0x01")  # the authorization taken elsewhere
    assert own is not None and used is not None
    assert (own.task_id, own.state, used.task_id) == ("task-2", OfferState.OFFERED, "task-1")
    own, used = await store.for_payment("task-1", "0xPayer", "0x01")  # presented again on its own task
    assert own is not None and used is not None
    assert own.task_id == used.task_id == "task-1"
    own, used = await store.for_payment("task-2", "0xPayer", "0x02")  # a fresh authorization
    assert own is not None and own.task_id == "task-2" and used is None
    assert await store.for_payment("task-3", "0xPayer", "0x02") == (None, None)


@pytest.mark.parametrize("values", [{"held_artefacts": []}, {"updated_at": None}, {"payer_address": "0x1"}])
async def test_a_change_naming_no_settable_column_is_refused_and_writes_nothing(
    engine: AsyncEngine, values: dict[str, Any]
) -> None:
    store = OfferStore(engine)
    await _offer(store)
    before = await store.get("task-1")

    with pytest.raises(TypeError, match="not a settable column of payment_offers"):
        await store.advance("task-1", OfferState.SETTLING, **values)

    assert await store.get("task-1") == before


# -- every change of state is a compare-and-set ------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        (OfferState.SETTLING,),
        (OfferState.SETTLING, OfferState.PAID),
        (OfferState.FAILED,),
        (OfferState.SETTLING, OfferState.FAILED),
    ],
)
async def test_a_payment_taken_or_decided_is_never_rejected(
    engine: AsyncEngine, path: tuple[OfferState, ...]
) -> None:
    store = OfferStore(engine)
    await _offer(store)
    await _take(store)
    for state in path:
        assert await store.advance("task-1", state)
    before = await store.get("task-1")

    assert not await store.advance("task-1", OfferState.REJECTED)
    assert not await _offer(store)  # nor offered terms again

    assert await store.get("task-1") == before


async def test_a_decided_offer_never_changes_its_outcome(engine: AsyncEngine) -> None:
    store = OfferStore(engine)
    await _offer(store)
    assert await store.advance("task-1", OfferState.REJECTED)
    rejected = await store.get("task-1")

    for state in (OfferState.SETTLING, OfferState.PAID, OfferState.FAILED, OfferState.OFFERED):
        assert not await store.advance("task-1", state, error="SETTLEMENT_FAILED")
    assert (
        await store.submit(
            "task-1", round_=1, payer="0xPayer", nonce="0x01", payload={}, payload_hash="h", accepted={}
        )
        is None
    )

    assert await store.get("task-1") == rejected


async def test_of_a_rejection_and_a_payment_racing_one_wins(engine: AsyncEngine) -> None:
    for round_ in range(20):
        task_id = f"task-{round_}"
        store = OfferStore(engine)
        await _offer(store, task_id)

        rejected, taken = await asyncio.gather(
            store.advance(task_id, OfferState.REJECTED),
            store.submit(
                task_id,
                round_=1,
                payer="0xPayer",
                nonce=f"0x{round_}",
                payload={},
                payload_hash="h",
                accepted={},
            ),
        )

        offer = await store.get(task_id)
        assert offer is not None
        assert rejected != (taken is not None), round_
        assert offer.state is (OfferState.REJECTED if rejected else OfferState.WORKING)
