"""The merchant's database connection lost in the middle of a transaction of a paid turn.

The test holds a lock the merchant's statement needs, waits until the merchant's backend waits on it,
terminates that backend (what a network cut or a database failover does to a connection) and lets go of
the lock. The merchant keeps running; its client either gets the completed task or polls it there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import pytest

from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import A2ACallError, MerchantWire

from .clients import open_task, pay, poll_until_definite
from .conftest import Scenario
from .database import DatabaseProbe
from .payments import EIP3009, UPTO, PaymentKind

pytestmark = pytest.mark.error_logs("why: the merchant's database connection is cut mid-transaction")

# The event's insert is a CTE of the statement that reads its endpoints (PostgreSQL).
_BOOKING = "WITH new_event AS \n(INSERT INTO webhook_events"
TRANSACTIONS = [
    pytest.param("INSERT INTO settlement_claims", EIP3009, id="claiming the authorization"),
    pytest.param(_BOOKING, EIP3009, id="booking the settlement and its event"),
    # A metered booking (the usage's amount, the maximum beside it) of a Permit2 settlement.
    pytest.param(_BOOKING, UPTO, id="booking the settlement and its event-upto"),
    pytest.param("UPDATE payment_offers", EIP3009, id="recording the offer paid"),
]


@asynccontextmanager
async def _blocked_at(
    statement: str, task_id: str, scenario: Scenario
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Hold a lock that `statement` of the paid turn will wait on; released when the block ends.

    Yields what to await once the payment is under way (the lock may only be taken then).
    """
    database, proxy = scenario.database, scenario.proxy
    async with AsyncExitStack() as stack:
        if statement == "UPDATE payment_offers":
            # The offer is updated at every stage: lock it only once the settlement is on its way.
            held = proxy.hold(b"eth_getTransactionReceipt", deliver=False)
            stack.callback(proxy.discard, held)

            async def arm() -> None:
                await wait_until(held.reached.is_set, what="the receipt wait")
                row = "SELECT task_id FROM payment_offers WHERE task_id = :task_id FOR UPDATE"
                await stack.enter_async_context(database.locked(row, task_id=task_id))
                proxy.release(held)

        else:
            table = statement.rsplit(" ", 1)[1]
            await stack.enter_async_context(database.locked(f"LOCK TABLE {table} IN EXCLUSIVE MODE"))

            async def arm() -> None:
                return None

        yield arm


@pytest.mark.parametrize(("statement", "kind"), TRANSACTIONS)
async def test_a_database_connection_lost_mid_transaction_does_not_lose_or_double_a_payment(
    statement: str,
    kind: PaymentKind,
    scenario: Scenario,
) -> None:
    merchant = await scenario.start(
        kind,
        rpc_url=scenario.proxy.url,
        reconcile_interval_s=0.5,
        reconcile_stale_after_s=3,
        claim_lease_s=1,
    )
    payer_key = scenario.new_payer(kind)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        async with _blocked_at(statement, task_id, scenario) as arm:
            paying = asyncio.create_task(pay(wire, task_id, kind.sign(payer_key, terms).wire))
            await arm()
            await wait_until(lambda: _waiting(scenario.database, statement), what=f"{statement} to wait")
            for pid in await scenario.database.waiting(statement):
                await scenario.database.terminate(pid)
        try:
            answer: object = (await paying)["status"]
        except A2ACallError as exc:
            answer = exc  # no answer to this call: the client polls the task it holds
        done = await poll_until_definite(wire, task_id)
        await wait_until(lambda: _no_payment_in_progress(scenario.database), what="the reconciler to finish")

    assert merchant.alive
    report = await scenario.invariants(client_views={task_id: done["status"]["state"]})
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", (answer, done["status"])
    assert [transfer.amount for transfer in report.transfers] == [kind.charged]


async def _waiting(database: DatabaseProbe, statement: str) -> bool:
    return bool(await database.waiting(statement))


async def _no_payment_in_progress(database: DatabaseProbe) -> bool:
    taking = "SELECT count(*) FROM payment_offers WHERE state IN ('working', 'settling')"
    return bool(await database.scalar(taking) == 0)
