"""The merchant SIGKILLed at each step of settling a paid turn, then restarted on the same database.

Steps, in the order a paid turn passes them: the authorization claimed (nothing sent); the transaction
taken by the node (the merchant never heard back); the broadcast recorded (no receipt yet); the receipt in
(nothing booked); the ledger entry written (its webhook event not yet, same transaction); the booking
committed with its event and the offer recorded paid (the task not yet told). The merchant is stopped at
the step by a test-only hand that is not in the product: the RPC proxy holds a request, or the test holds
a PostgreSQL lock the merchant needs. After the restart the client, holding only its task id, polls it to
a definite answer, and the invariants hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
import pytest
from eth_account import Account

from a2a_x402.facilitator.wire import PaymentPayload
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import submit_directly
from tests.fixtures.deadlines import wait_until
from tests.fixtures.invariants import InvariantReport
from tests.fixtures.merchant import MerchantWire, ledger_entries

from .clients import open_task, pay, poll_until_definite
from .conftest import Scenario
from .processes import MerchantProcess

Reached = Callable[[], Awaitable[None]]

STEPS = [
    pytest.param("claimed", id="after the claim, before the broadcast"),
    pytest.param("sent", id="after the node took the transaction, before the merchant heard"),
    pytest.param("broadcast", id="after the broadcast was recorded, before the receipt"),
    pytest.param("receipt", id="after the receipt, before the ledger write"),
    pytest.param("ledger", id="after the ledger write, before the outbox write"),
    pytest.param("outbox", id="after the booking and the offer commit, before the task is told"),
]


class _Stop:
    """Where and how the merchant is stopped for one step."""

    def __init__(self, scenario: Scenario, payload: PaymentPayload) -> None:
        self._chain = scenario.chain
        self._proxy = scenario.proxy
        self._database = scenario.database
        self.payload = payload
        authorization = payload.payload.authorization
        self._payer, self._nonce = authorization.from_address, authorization.nonce

    async def claim_state(self) -> str | None:
        """The state of the authorization's settlement claim."""
        state = await self._database.scalar(
            "SELECT state FROM settlement_claims WHERE payer = :payer AND nonce = :nonce",
            payer=self._payer,
            nonce=self._nonce,
        )
        return None if state is None else str(state)

    def used_on_chain(self) -> bool:
        """Whether the authorization was used on chain."""
        return self._chain.authorization_state(self._payer, bytes.fromhex(self._nonce[2:]))

    @asynccontextmanager
    async def at(self, step: str, task_id: str) -> AsyncIterator[Reached]:
        """Arrange the stop at `step`; yield a wait for the merchant to stand there; undo it afterwards."""
        async with AsyncExitStack() as stack:
            if step in ("claimed", "sent"):
                yield self._sending(stack, delivered=step == "sent")
            elif step == "broadcast":
                yield self._broadcast(stack)
            elif step in ("receipt", "ledger"):
                yield await self._booking(stack, step)
            elif step == "settling":
                yield await self._claiming(stack, task_id)
            else:
                yield self._telling(stack, task_id)

    def _sending(self, stack: AsyncExitStack, *, delivered: bool) -> Reached:
        """Hold the transaction on its way to the node (or its answer on the way back)."""
        held = self._proxy.hold(b"eth_sendRawTransaction", deliver=delivered)
        stack.callback(self._proxy.discard, held)

        async def reached() -> None:
            await wait_until(held.reached.is_set, what="the settlement to be sent")
            if delivered:
                await wait_until(self.used_on_chain, what="the node to mine the settlement")
            assert await self.claim_state() == "claimed"

        return reached

    async def _claiming(self, stack: AsyncExitStack, task_id: str) -> Reached:
        """Lock the claims table: the work is done and held, the settlement not yet claimed."""
        await stack.enter_async_context(
            self._database.locked("LOCK TABLE settlement_claims IN EXCLUSIVE MODE")
        )

        async def reached() -> None:
            waiting = "INSERT INTO settlement_claims"
            await wait_until(lambda: _any(self._database.waiting(waiting)), what=f"{waiting} to wait")
            settling = "SELECT state FROM payment_offers WHERE task_id = :task_id"
            assert await self._database.scalar(settling, task_id=task_id) == "settling"

        return reached

    def _broadcast(self, stack: AsyncExitStack) -> Reached:
        """Hold the receipt polls; the merchant records the broadcast and waits."""
        held = self._proxy.hold(b"eth_getTransactionReceipt", deliver=False)
        stack.callback(self._proxy.discard, held)

        async def reached() -> None:
            await wait_until(
                lambda: _is(self.claim_state(), "broadcast"), what="the broadcast to be recorded"
            )

        return reached

    async def _booking(self, stack: AsyncExitStack, step: str) -> Reached:
        """Lock what the booking transaction takes first (the sequence) or last (the outbox)."""
        if step == "receipt":
            # On PostgreSQL the booking takes the sequence in the first CTE of its one statement.
            lock, waiting = (
                "SELECT value FROM ledger_sequence WHERE id = 1 FOR UPDATE",
                "WITH seq AS (\n    UPDATE ledger_sequence",
            )
        else:
            # On PostgreSQL the event's insert is a CTE of the statement that reads its endpoints.
            lock, waiting = (
                "LOCK TABLE webhook_events IN EXCLUSIVE MODE",
                "WITH new_event AS \n(INSERT INTO webhook_events",
            )
        await stack.enter_async_context(self._database.locked(lock))

        async def reached() -> None:
            await wait_until(lambda: _any(self._database.waiting(waiting)), what=f"{waiting} to wait")
            assert await self.claim_state() == "succeeded"

        return reached

    def _telling(self, stack: AsyncExitStack, task_id: str) -> Reached:
        """Hold the receipt until the task's row is locked, so the booking is all that gets through."""
        held = self._proxy.hold(b"eth_getTransactionReceipt", deliver=False)
        stack.callback(self._proxy.discard, held)
        task = "SELECT id FROM tasks WHERE id = :task_id FOR UPDATE"

        async def reached() -> None:
            await wait_until(held.reached.is_set, what="the receipt wait")
            await stack.enter_async_context(self._database.locked(task, task_id=task_id))
            self._proxy.release(held)
            await wait_until(
                lambda: _any(self._database.waiting("INSERT INTO tasks")), what="the task's save to wait"
            )
            assert await self._database.scalar("SELECT count(*) FROM webhook_events") == 1  # committed
            paid = "SELECT state FROM payment_offers WHERE task_id = :task_id"
            assert await self._database.scalar(paid, task_id=task_id) == "paid"

        return reached


async def _is(value: Awaitable[str | None], expected: str) -> bool:
    return await value == expected


async def _any(values: Awaitable[list[int]]) -> bool:
    return bool(await values)


async def _killed_at(
    step: str, scenario: Scenario, *, count_foreign_settlements: bool = False
) -> tuple[MerchantProcess, str, _Stop]:
    """Start a merchant (counting foreign settlements or not), pay for a task and SIGKILL the merchant
    where it stands at `step`.

    Returns the dead merchant, the task's id and the stop (which knows the payment's authorization).
    """
    # A short claim lease, so a claim the dead process held can be taken over within the test.
    merchant = await scenario.merchants.start(
        rpc_url=scenario.proxy.url,
        claim_lease_s=1,
        settle_timeout_s=20,
        count_foreign_settlements=count_foreign_settlements,
    )
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        payload = sign_payment(scenario.new_payer(), terms)
        stop = _Stop(scenario, payload)
        async with stop.at(step, task_id) as reached:
            paying = asyncio.create_task(pay(wire, task_id, payload))
            await reached()
            merchant.kill()
            with pytest.raises(httpx.TransportError):
                await paying  # the client got no answer, only its task id
    return merchant, task_id, stop


async def _completed_after_a_restart(
    merchant: MerchantProcess, task_id: str, scenario: Scenario
) -> InvariantReport:
    """Restart `merchant` on the real node; the client, polling its task, sees it completed with its work,
    paid by one transfer and booked once, and a reconcile pass finds nothing left. Returns the invariants'
    report."""
    restarted = await scenario.merchants.restart(
        merchant, rpc_url=scenario.chain.rpc_url, reconcile_interval_s=0.5, reconcile_stale_after_s=0.5
    )
    async with restarted.http() as http:
        done = await poll_until_definite(MerchantWire(http, "jsonrpc"), task_id)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    assert [a["name"] for a in done["artifacts"]] == ["text-stats"]
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert len(report.transfers) == 1 and report.booked_tasks == [task_id]
    final_pass = await scenario.merchants.reconcile(restarted)
    assert final_pass.returncode == 0, final_pass.stderr
    return report


@pytest.mark.parametrize("step", STEPS)
async def test_a_merchant_killed_mid_settlement_finishes_the_paid_turn_after_a_restart(
    step: str,
    scenario: Scenario,
) -> None:
    merchant, task_id, _ = await _killed_at(step, scenario)

    await _completed_after_a_restart(merchant, task_id, scenario)


@pytest.mark.parametrize(
    "step",
    [
        pytest.param("settling", id="after the work, before the claim"),
        pytest.param("claimed", id="after the claim, before the broadcast"),
    ],
)
async def test_a_payment_front_run_while_the_merchant_was_down_completes_the_task_after_a_restart(
    step: str,
    scenario: Scenario,
) -> None:
    """Killed before its settlement was broadcast; meanwhile someone else submits the authorization.

    The payee was paid once, by the front-runner's transaction, mined after the merchant took the payment:
    where foreign settlements count (this deployment's database is the only one paying to its payTo),
    recovery settles the task with it, delivers the held work and books it. The order is vouched for by the
    claim where there is one, else by the offer's stored taken time.
    """
    merchant, task_id, stop = await _killed_at(step, scenario, count_foreign_settlements=True)
    await asyncio.to_thread(submit_directly, scenario.chain, stop.payload)
    assert stop.used_on_chain()

    report = await _completed_after_a_restart(merchant, task_id, scenario)

    [transfer] = report.transfers
    chain = scenario.chain
    on_chain = await asyncio.to_thread(chain.rpc.call, "eth_getTransactionReceipt", [transfer.tx_hash])
    assert on_chain["from"] == Account.from_key(chain.deployer_key).address.lower()  # the front-runner's


@pytest.mark.parametrize(
    "step",
    [
        pytest.param("settling", id="after the work, before the claim"),
        pytest.param("claimed", id="after the claim, before the broadcast"),
    ],
)
async def test_a_payment_front_run_while_the_merchant_was_down_fails_unbooked_after_a_restart_by_default(
    step: str,
    scenario: Scenario,
) -> None:
    """The same, with the default rule: the front-runner's transaction may be another deployment's
    settlement of this authorization, so recovery fails the task, delivers nothing and books nothing."""
    merchant, task_id, stop = await _killed_at(step, scenario)
    await asyncio.to_thread(submit_directly, scenario.chain, stop.payload)
    assert stop.used_on_chain()

    restarted = await scenario.merchants.restart(
        merchant, rpc_url=scenario.chain.rpc_url, reconcile_interval_s=0.5, reconcile_stale_after_s=0.5
    )
    async with restarted.http() as http:
        done = await poll_until_definite(MerchantWire(http, "jsonrpc"), task_id)

    assert done["status"]["state"] == "TASK_STATE_FAILED", done["status"]
    assert "artifacts" not in done
    assert await ledger_entries(scenario.database_url) == []
    final_pass = await scenario.merchants.reconcile(restarted)
    assert stop.payload.payload.authorization.nonce.lower() in final_pass.stdout + final_pass.stderr
