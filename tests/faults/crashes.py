"""The merchant SIGKILLed at a step of settling a paid turn, then restarted on the same database: the steps,
how the merchant is stopped at each, and the restart after which the client gets its answer.

Steps, in the order a paid turn passes them (`STEPS`): the authorization claimed (nothing sent); the
transaction taken by the node (the merchant never heard back); the broadcast recorded (no receipt yet); the
receipt in (nothing booked); the ledger entry written (its webhook event not yet, same transaction); the
booking committed with its event and the offer recorded paid (the task not yet told). Before them all,
`settling`: the work done and held, the settlement not yet claimed. A metered turn that used nothing sends
nothing: its `outbox` step is its offer recorded paid, nothing booked, the task not yet told.

The merchant is stopped at the step by a test-only hand that is not in the product: the RPC proxy holds a
request, or the test holds a PostgreSQL lock the merchant needs. The scenarios (`test_crash*.py`, one file
per transfer method so that the test runner's workers share them) then restart it; the client, holding
only its task id, polls it to a definite answer, and the invariants hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
import pytest

from a2a_x402.extension import AP2_CHECKOUT_ARTIFACT_ID, PaymentCompletedData
from tests.fixtures.deadlines import wait_until
from tests.fixtures.invariants import InvariantReport
from tests.fixtures.merchant import MerchantWire, payment_data

from .clients import open_offer, pay, poll_until_definite
from .conftest import Scenario
from .payments import EIP3009, PaymentKind, Signed
from .processes import MerchantProcess

__all__ = ["STEPS", "Stop", "completed_after_a_restart", "killed_at"]

Reached = Callable[[], Awaitable[None]]

STEPS = [
    pytest.param("claimed", id="after the claim, before the broadcast"),
    pytest.param("sent", id="after the node took the transaction, before the merchant heard"),
    pytest.param("broadcast", id="after the broadcast was recorded, before the receipt"),
    pytest.param("receipt", id="after the receipt, before the ledger write"),
    pytest.param("ledger", id="after the ledger write, before the outbox write"),
    pytest.param("outbox", id="after the booking and the offer commit, before the task is told"),
]


class Stop:
    """Where and how the merchant is stopped for one step."""

    def __init__(self, scenario: Scenario, kind: PaymentKind, signed: Signed) -> None:
        self._chain = scenario.chain
        self._proxy = scenario.proxy
        self._database = scenario.database
        self._kind = kind
        self.signed = signed
        self._payer, self._nonce = signed.payer, signed.nonce

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
        return self.signed.used_on_chain(self._chain)

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
            elif self._kind.sends_nothing:
                yield await self._telling_nothing(stack, task_id)
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

    async def _telling_nothing(self, stack: AsyncExitStack, task_id: str) -> Reached:
        """A settlement of 0 sends nothing (no receipt to hold): lock the claims table until the merchant
        waits there, then the task's row, then let the claim through; the offer is recorded paid and the
        task's save waits."""
        claims = AsyncExitStack()
        stack.push_async_callback(claims.aclose)
        await claims.enter_async_context(
            self._database.locked("LOCK TABLE settlement_claims IN EXCLUSIVE MODE")
        )
        task = "SELECT id FROM tasks WHERE id = :task_id FOR UPDATE"

        async def reached() -> None:
            waiting = "INSERT INTO settlement_claims"
            await wait_until(lambda: _any(self._database.waiting(waiting)), what=f"{waiting} to wait")
            await stack.enter_async_context(self._database.locked(task, task_id=task_id))
            await claims.aclose()
            await wait_until(
                lambda: _any(self._database.waiting("INSERT INTO tasks")), what="the task's save to wait"
            )
            assert await self.claim_state() == "succeeded"
            assert await self._database.scalar("SELECT count(*) FROM webhook_events") == 0  # nothing booked
            paid = "SELECT state FROM payment_offers WHERE task_id = :task_id"
            assert await self._database.scalar(paid, task_id=task_id) == "paid"

        return reached


async def _is(value: Awaitable[str | None], expected: str) -> bool:
    return await value == expected


async def _any(values: Awaitable[list[int]]) -> bool:
    return bool(await values)


async def killed_at(
    step: str, scenario: Scenario, kind: PaymentKind = EIP3009, *, count_foreign_settlements: bool = False
) -> tuple[MerchantProcess, str, Stop]:
    """Start a merchant taking `kind` (counting foreign settlements or not), pay for a task and SIGKILL
    the merchant where it stands at `step`.

    Returns the dead merchant, the task's id and the stop (which knows the payment's authorization).
    """
    # A short claim lease, so a claim the dead process held can be taken over within the test.
    merchant = await scenario.start(
        kind,
        rpc_url=scenario.proxy.url,
        claim_lease_s=1,
        settle_timeout_s=20,
        count_foreign_settlements=count_foreign_settlements,
    )
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms, checkout = await open_offer(wire)
        signed = scenario.sign(kind, scenario.new_payer(kind), terms, checkout)
        stop = Stop(scenario, kind, signed)
        async with stop.at(step, task_id) as reached:
            paying = asyncio.create_task(pay(wire, task_id, signed.wire, signed.mandates))
            await reached()
            merchant.kill()
            with pytest.raises(httpx.TransportError):
                await paying  # the client got no answer, only its task id
    return merchant, task_id, stop


async def completed_after_a_restart(
    merchant: MerchantProcess, task_id: str, scenario: Scenario, kind: PaymentKind = EIP3009
) -> InvariantReport:
    """Restart `merchant` on the real node; the client, polling its task, sees it completed with its work,
    paid by one transfer of what `kind` charges and booked once (a metered turn that used nothing: by none,
    and booked never; an `ap2` one with its AP2 references), and a reconcile pass finds nothing left.
    Returns the invariants' report."""
    restarted = await scenario.merchants.restart(
        merchant, rpc_url=scenario.chain.rpc_url, reconcile_interval_s=0.5, reconcile_stale_after_s=0.5
    )
    async with restarted.http() as http:
        done = await poll_until_definite(MerchantWire(http, "jsonrpc"), task_id)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    # The work, and (in the embedded flow) the round's checkout, which came with the terms.
    artifacts = {a["artifactId"]: a["name"] for a in done["artifacts"]}
    assert [name for i, name in artifacts.items() if i != AP2_CHECKOUT_ARTIFACT_ID] == ["text-stats"]
    assert (AP2_CHECKOUT_ARTIFACT_ID in artifacts) == kind.ap2
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    if kind.sends_nothing:
        assert (report.transfers, report.booked_tasks) == ([], [])
    else:
        assert [t.amount for t in report.transfers] == [kind.charged] and report.booked_tasks == [task_id]
    assert report.ap2_booked_tasks == ([task_id] if kind.ap2 else [])
    if kind.metered:
        completed = payment_data(done)
        assert isinstance(completed, PaymentCompletedData) and completed.usage is not None
        assert (completed.usage.settled, completed.receipts[-1].success) == (kind.charged, True)
    final_pass = await scenario.merchants.reconcile(restarted)
    assert final_pass.returncode == 0, final_pass.stderr
    return report
