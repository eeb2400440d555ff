"""A metered payment whose relayer key another facilitator process holds at settlement: never failed while
its authorization is valid, settled once the key is where the merchant asks, failed uncharged once it
expired.

Three facilitators share one claim store and a pool of two relayer keys, each process taking at most one:
two lease holders started first (one key each) and the merchant's own, served over HTTP, which holds none.
Its `/supported` names either key (picked at random), and it verifies payments naming either, but every
settle of one is refused with `upto_facilitator_mismatch` until the holder of that key stops and the
merchant's facilitator takes its lease.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eth_account import Account
from pydantic import SecretStr

from a2a_x402.devchain import DevChain
from a2a_x402.extension import PaymentCompletedData, PaymentErrorCode, PaymentFailedData
from a2a_x402.facilitator import Facilitator, create_app
from a2a_x402.merchant.payments._key_elsewhere import KEY_ELSEWHERE_TEXT
from a2a_x402.storage import create_engine
from tests.devchain.permit2_sdk import permit2_payer
from tests.facilitator.permit2_payments import resign
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator import facilitator_settings_on
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    own_relayer_key,
    payment_data,
    payment_message,
)
from tests.fixtures.servers import serve_asgi

from .flows import JSON, address_of, offer, texts
from .test_metered_settlement import MeteredExecutor, metered_merchant, upto_payment

_USED = 9 * 25
_MERCHANT_LEASE_S = 3.0
"""The merchant's facilitator tries the free keys every second (a third of its lease)."""
_VALID_S = 30
"""How long the payment of the expiry test is valid: its verification and settle must come well before."""
_MARGIN_S = 6
"""The facilitator refuses an authorization this close to its deadline as expired (time to settle in)."""


@dataclass
class Pool:
    """The two lease holders (by the key each holds) and the merchant's facilitator's URL."""

    holders: dict[str, Facilitator]
    url: str
    stopped: set[str] = field(default_factory=set)

    async def stop_holder(self, address: str) -> None:
        """Stop the holder of `address`: its lease is given back."""
        self.stopped.add(address)
        await self.holders[address].aclose()


@contextmanager
def _served(chain: DevChain, database_url: str, second_key: str) -> Iterator[str]:
    settings = facilitator_settings_on(
        chain,
        database_url,
        relayer_keys=SecretStr(second_key),
        relayer_max_keys=1,
        relayer_lease_s=_MERCHANT_LEASE_S,
    )
    with serve_asgi(create_app(settings=settings)) as url:
        yield url


@asynccontextmanager
async def key_pool(chain: DevChain, database_url: str) -> AsyncIterator[Pool]:
    """The pool of the chain's relayer key and one made now, split between two holders; the merchant's
    facilitator, started last, holds neither."""
    second_key = own_relayer_key(chain)
    pool = Pool({}, "")
    try:
        for _ in range(2):
            holder = await Facilitator.open(
                facilitator_settings_on(
                    chain, database_url, relayer_keys=SecretStr(second_key), relayer_max_keys=1
                )
            )
            [held] = [state.address for state in holder.relayer_states() if state.held] or [""]
            pool.holders[held] = holder
        assert set(pool.holders) == {address_of(chain.relayer_key), Account.from_key(second_key).address}
        with _served(chain, database_url, second_key) as pool.url:
            yield pool
    finally:
        for address, holder in pool.holders.items():
            if address not in pool.stopped:
                await holder.aclose()


def _merchant(
    start_merchant: MerchantStarter, database_url: str, tmp_path: Path, pool: Pool, executor: MeteredExecutor
) -> RunningMerchant:
    return metered_merchant(
        start_merchant,
        database_url,
        tmp_path,
        executor,
        facilitator_url=pool.url,
        # Long enough for a busy machine's verification before the refusal; the turn asks again within it.
        settle_timeout_s=5.0,
        reconcile_interval_s=0.5,
        reconcile_stale_after_s=1.0,
    )


async def _pay(chain: DevChain, merchant: RunningMerchant, **changes: Any) -> tuple[str, JSON, JSON]:
    """Ask for the metered skill and pay it (its authorization with `changes`): (payer, offered, answered)."""
    key = permit2_payer(chain, chain.asset, 10**9)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire)
        payment = upto_payment(chain, key, task)
        if changes:
            payment = resign(payment, changes, key=key, chain_id=chain.chain_id)
        answered = (await wire.send(payment_message(task["id"], payment)))["task"]
    return address_of(key), task, answered


async def _offer_state(database_url: str, task_id: str) -> str:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            query = sa.text("SELECT state FROM payment_offers WHERE task_id = :task")
            return str((await connection.execute(query, {"task": task_id})).scalar_one())
    finally:
        await engine.dispose()


async def _task(merchant: RunningMerchant, task_id: str) -> JSON:
    async with merchant.http() as http:
        task: JSON = await MerchantWire(http, "jsonrpc").get_task(task_id)
    return task


async def _reached(merchant: RunningMerchant, task_id: str, state: str) -> bool:
    return bool((await _task(merchant, task_id))["status"]["state"] == state)


def _nonces(chain: DevChain, addresses: list[str]) -> list[int]:
    return [int(chain.rpc.call("eth_getTransactionCount", [a, "latest"]), 16) for a in addresses]


async def test_a_settle_refused_for_a_key_held_elsewhere_waits_and_is_recovered_once_the_key_moves(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with key_pool(chain, sqlite_url) as pool:
        executor = MeteredExecutor([("tokens", 9, 25)])
        merchant = _merchant(start_merchant, sqlite_url, tmp_path, pool, executor)
        relayers = sorted(pool.holders)
        nonces_before = _nonces(chain, relayers)
        payee_before = chain.balance_of(DEFAULT_PAY_TO)
        with caplog.at_level(logging.WARNING):
            payer, task, answered = await _pay(chain, merchant)
            named = str((offered_terms(task).accepts[0].extra or {})["facilitatorAddress"])

            # Refused at settlement by the process answering: the task waits, nothing charged or booked.
            assert answered["status"]["state"] == "TASK_STATE_WORKING", texts(answered)
            assert texts(answered)[-1] == KEY_ELSEWHERE_TEXT
            assert await _offer_state(sqlite_url, task["id"]) == "settling"
            postponed = f"recovery of task {task['id']} postponed"
            await wait_until(
                lambda: any(postponed in r.getMessage() for r in caplog.records),
                what="a recovery pass to ask again and postpone",
            )
            assert await _reached(merchant, task["id"], "TASK_STATE_WORKING")
            assert (_nonces(chain, relayers), chain.balance_of(payer)) == (nonces_before, 10**9)
            assert await ledger_entries(sqlite_url) == []

            # The holder of the named key stops: the merchant's facilitator takes its lease, and recovery
            # settles the payment from it, for the usage.
            await pool.stop_holder(named)
            await wait_until(
                lambda: _reached(merchant, task["id"], "TASK_STATE_COMPLETED"),
                what="the recovery to settle the task",
            )
            done = await _task(merchant, task["id"])
        merchant.stop()  # before its facilitators: its reconciler would ask them after they are gone

    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData) and completed.usage is not None
    assert completed.usage.settled == _USED
    sender = chain.rpc.call("eth_getTransactionByHash", [str(completed.receipts[-1].transaction)])["from"]
    assert sender.lower() == named.lower()
    assert chain.balance_of(payer) == 10**9 - _USED
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + _USED
    assert sum(_nonces(chain, relayers)) == sum(nonces_before) + 1  # one transaction, from the named key
    assert [(e.task_id, e.amount) for e in await ledger_entries(sqlite_url)] == [(task["id"], _USED)]
    assert executor.runs == 1


async def test_a_settle_refused_for_a_key_held_elsewhere_fails_uncharged_once_the_payment_expired(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    async with key_pool(chain, sqlite_url) as pool:
        merchant = _merchant(start_merchant, sqlite_url, tmp_path, pool, MeteredExecutor([("tokens", 9, 25)]))
        relayers = sorted(pool.holders)
        nonces_before = _nonces(chain, relayers)
        deadline = int(time.time()) + _VALID_S
        payer, task, answered = await _pay(chain, merchant, deadline=str(deadline))
        assert answered["status"]["state"] == "TASK_STATE_WORKING", texts(answered)

        await wait_until(
            lambda: _reached(merchant, task["id"], "TASK_STATE_FAILED"),
            what="the recovery to fail the expired payment",
        )
        failed_at = time.time()
        failed = await _task(merchant, task["id"])
        merchant.stop()  # before its facilitators: its reconciler would ask them after they are gone

    # Not before the facilitator refused the authorization as expired: within its margin of the deadline.
    assert failed_at >= deadline - _MARGIN_S
    data = payment_data(failed)
    assert isinstance(data, PaymentFailedData) and data.error is PaymentErrorCode.EXPIRED_PAYMENT
    assert texts(failed)[-1] == (
        "Settlement failed: the authorization is not valid at this time; nothing was charged; this task has "
        "ended: send the request again for new terms"
    )
    assert (_nonces(chain, relayers), chain.balance_of(payer)) == (nonces_before, 10**9)
    assert await ledger_entries(sqlite_url) == []
    assert await _offer_state(sqlite_url, task["id"]) == "failed"
