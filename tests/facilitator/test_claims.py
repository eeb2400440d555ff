"""The claim store on SQLite and PostgreSQL: one winner per authorization, take-over only of released or
abandoned claims, the first recorded answer stands, and waiters see changes made by other processes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.facilitator import ClaimState, IdempotencyConflictError
from a2a_x402.facilitator._claims import Claim, ClaimKey, ClaimStore
from a2a_x402.storage import create_engine

ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
PAYER = "0x2BD786253040452c8aF28bb147C7E202361B98F2"
PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"
TX_HASH = "0x" + "ab" * 32
_WAIT_S = 30.0
"""How long the waiters of the change test wait: any wake-up well before it was caused by the change."""


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


def _key() -> ClaimKey:
    return ClaimKey(84532, ASSET, PAYER, "0x" + os.urandom(32).hex())


def _claiming(store: ClaimStore) -> Callable[..., Awaitable[tuple[Claim, bool]]]:
    async def claim(key: ClaimKey, idempotency_key: str | None = None) -> tuple[Claim, bool]:
        return await store.claim(
            key,
            idempotency_key=idempotency_key,
            payload_hash="0" * 64,
            network="eip155:84532",
            pay_to=PAY_TO,
            amount=2**256 - 1,
            valid_before=2**63 - 1,
        )

    return claim


async def test_one_of_many_concurrent_claims_wins(engine: AsyncEngine) -> None:
    claim = _claiming(ClaimStore(engine))
    key = _key()

    results = await asyncio.gather(*(claim(key) for _ in range(30)))

    assert [created for _, created in results].count(True) == 1
    assert {c.id for c, _ in results} == {results[0][0].id}
    stored = await ClaimStore(engine).by_key(key)
    assert stored is not None
    assert (stored.state, stored.attempt, stored.amount) == (ClaimState.CLAIMED, 1, 2**256 - 1)


async def test_an_idempotency_key_reused_for_another_authorization_finds_its_claim(
    engine: AsyncEngine,
) -> None:
    claim = _claiming(ClaimStore(engine))
    first, _ = await claim(_key(), "order-1")

    second, created = await claim(_key(), "order-1")

    assert (second.id, created) == (first.id, False)


async def test_only_released_or_abandoned_claims_are_taken_over_and_only_once(engine: AsyncEngine) -> None:
    store = ClaimStore(engine)
    live, _ = await _claiming(store)(_key())
    assert await store.take_over(live, idempotency_key=None, payload_hash="1" * 64) is None

    await store.record_response(live.id, {"success": False}, state=ClaimState.RELEASED)
    released = await store.get(live.id)
    assert released is not None
    taken = await asyncio.gather(
        *(store.take_over(released, idempotency_key="retry", payload_hash="1" * 64) for _ in range(10))
    )

    [winner] = [t for t in taken if t is not None]
    assert (winner.state, winner.attempt, winner.idempotency_key, winner.response) == (
        ClaimState.CLAIMED,
        2,
        "retry",
        None,
    )


async def test_a_claim_whose_owner_went_silent_can_be_taken_over_after_its_lease(engine: AsyncEngine) -> None:
    store = ClaimStore(engine, lease_s=1)  # long enough to hold while other test workers share the CPUs
    claim, _ = await _claiming(store)(_key())
    assert not claim.lease_expired

    await asyncio.sleep(1.1)
    stale = await store.get(claim.id)

    assert stale is not None and stale.lease_expired
    assert await store.take_over(stale, idempotency_key=None, payload_hash="1" * 64) is not None


async def test_taking_over_with_another_claims_idempotency_key_conflicts(engine: AsyncEngine) -> None:
    store = ClaimStore(engine)
    claim = _claiming(store)
    await claim(_key(), "taken")
    released, _ = await claim(_key())
    await store.record_response(released.id, {"success": False}, state=ClaimState.RELEASED)
    current = await store.get(released.id)
    assert current is not None

    with pytest.raises(IdempotencyConflictError):
        await store.take_over(current, idempotency_key="taken", payload_hash="1" * 64)


async def test_the_first_answer_recorded_for_a_finished_claim_stands(engine: AsyncEngine) -> None:
    store = ClaimStore(engine)
    claim, _ = await _claiming(store)(_key())
    await store.mark_broadcast(claim.id, relayer=PAY_TO, relayer_nonce=7, tx_hash=TX_HASH, raw_tx="0x02")

    pending = await store.record_response(claim.id, {"errorReason": "settlement_pending"})
    settled = await store.record_response(
        claim.id, {"success": True}, state=ClaimState.SUCCEEDED, block_number=9
    )
    late = await store.record_response(claim.id, {"errorReason": "settlement_pending"})

    assert (pending.state, pending.response, pending.tx_hash) == (
        ClaimState.BROADCAST,
        {"errorReason": "settlement_pending"},
        TX_HASH,
    )
    assert (settled.state, settled.response, settled.block_number) == (
        ClaimState.SUCCEEDED,
        {"success": True},
        9,
    )
    assert late == settled


async def test_waiters_see_changes_made_here_at_once_and_elsewhere_by_polling(engine: AsyncEngine) -> None:
    # This process's store never polls within the wait: only its own change event can wake it before the
    # wait's deadline, when it would read the claim one last time.
    store, elsewhere = ClaimStore(engine, poll_s=2 * _WAIT_S), ClaimStore(engine, poll_s=0.05)
    claim, _ = await _claiming(store)(_key())

    def broadcast(c: Claim) -> bool:
        return c.state is ClaimState.BROADCAST

    assert await store.wait_for(claim.id, broadcast, timeout_s=0.1) is None
    local = asyncio.create_task(store.wait_for(claim.id, broadcast, timeout_s=_WAIT_S))
    remote = asyncio.create_task(elsewhere.wait_for(claim.id, broadcast, timeout_s=_WAIT_S))
    await asyncio.sleep(0.02)
    started = time.monotonic()
    await store.mark_broadcast(claim.id, relayer=PAY_TO, relayer_nonce=1, tx_hash=TX_HASH, raw_tx="0x02")
    seen_here = await local
    here_after = time.monotonic() - started
    seen_elsewhere = await remote

    assert seen_here is not None and seen_here.tx_hash == TX_HASH
    assert seen_elsewhere is not None and seen_elsewhere.tx_hash == TX_HASH
    assert here_after < _WAIT_S / 3  # woken by the change, not at the wait's deadline
