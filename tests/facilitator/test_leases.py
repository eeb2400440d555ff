"""Relayer key leases on SQLite and PostgreSQL: one holder at a time, taken over only after expiry (and
then marked as a takeover, so the taker accounts for the earlier holder's transactions), renewed only by
their holder, given back on release; and the pool's keys short of gas take no new settlements."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator._leases import Lease, LeaseStore
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator import make_requirements

from .conftest import OpenFacilitator
from .payments import relayer_address, relayer_nonce

RELAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
CHAIN_ID = 31337


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


def _store(engine: AsyncEngine, holder: str, lease_s: float) -> LeaseStore:
    return LeaseStore(engine, chain_id=CHAIN_ID, holder=holder, lease_s=lease_s)


async def test_a_key_is_held_by_one_holder_until_its_lease_runs_out(engine: AsyncEngine) -> None:
    first, second = _store(engine, "first", 0.5), _store(engine, "second", 30.0)

    assert await first.take(RELAYER) == Lease(RELAYER, taken_over=False)
    assert await second.take(RELAYER) is None
    assert await first.renew([RELAYER]) == {RELAYER}
    await asyncio.sleep(0.6)  # the lease's own length: what is tested is its expiry
    taken = await second.take(RELAYER)
    assert taken == Lease(RELAYER, taken_over=True)  # the first holder may have left transactions behind
    assert await first.renew([RELAYER]) == set()  # lost: the first holder stops using it
    assert await first.take(RELAYER) is None


async def test_a_released_key_is_taken_at_once_without_a_takeover(engine: AsyncEngine) -> None:
    first, second = _store(engine, "first", 30.0), _store(engine, "second", 30.0)
    await first.take(RELAYER)

    await second.release([RELAYER])  # not its to give back: nothing changes
    assert await second.take(RELAYER) is None
    await first.release([RELAYER])

    assert await second.take(RELAYER) == Lease(RELAYER, taken_over=False)


async def test_two_takers_of_a_free_key_get_it_once(engine: AsyncEngine) -> None:
    takers = [_store(engine, f"taker-{i}", 30.0) for i in range(6)]

    leases = await asyncio.gather(*(taker.take(RELAYER) for taker in takers))

    assert sum(lease is not None for lease in leases) == 1


async def test_a_key_below_the_balance_floor_takes_no_new_settlement(
    chain: DevChain, sqlite_url: str, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    balance = int(chain.rpc.call("eth_getBalance", [relayer_address(chain), "latest"]), 16)
    facilitator = await open_facilitator(
        sqlite_url, relayer_min_balance_wei=balance + 1, receipt_timeout_s=1.0
    )
    requirements = make_requirements(chain)
    nonce_before = relayer_nonce(chain)

    (state,) = facilitator.relayer_states()
    answer = await facilitator.settle(sign_payment(new_payer(), requirements), requirements)

    assert (state.held, state.usable, state.reason) == (True, False, "balance below the floor")
    assert state.balance_wei == balance
    assert not answer.success and "nothing was charged" in (answer.error_message or "")
    assert relayer_nonce(chain) == nonce_before
    chain.rpc.call("anvil_setBalance", [relayer_address(chain), hex(balance + 10**18)])
    await wait_until(lambda: facilitator.relayer_states()[0].usable, what="the funded key to take work")
