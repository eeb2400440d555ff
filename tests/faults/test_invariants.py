"""The invariant checker bites: each invariant, broken on purpose after a clean paid turn, is reported.

(The merchant runs in-process here: the checker, not the process model, is under test.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import PaymentRequirements
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.payments import submit_directly
from tests.fixtures.merchant import MerchantStarter, MerchantWire

from .clients import open_task, pay
from .conftest import Scenario


@dataclass(frozen=True)
class _Paid:
    """A merchant's database after one paid task, and a second task still offered."""

    scenario: Scenario
    paid_task: str
    offered_task: str
    offered_terms: PaymentRequirements
    payer_key: str

    @property
    def chain(self) -> DevChain:
        """The scenario's chain."""
        return self.scenario.chain

    @property
    def database_url(self) -> str:
        """The merchant's database."""
        return self.scenario.database_url

    async def execute(self, statement: str, **params: object) -> None:
        engine = create_engine(self.database_url)
        try:
            async with engine.begin() as connection:
                await connection.execute(sa.text(statement), params)
        finally:
            await engine.dispose()


@pytest.fixture
async def paid(scenario: Scenario, start_merchant: MerchantStarter) -> _Paid:
    merchant = start_merchant(scenario.database_url)
    payer_key = scenario.new_payer()
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        paid_task, terms = await open_task(wire)
        assert (await pay(wire, paid_task, sign_payment(payer_key, terms)))["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )
        offered_task, offered_terms = await open_task(wire)
    merchant.stop()
    return _Paid(scenario, paid_task, offered_task, offered_terms, payer_key)


async def _unbooked_transfer(paid: _Paid) -> None:
    submit_directly(paid.chain, sign_payment(paid.payer_key, paid.offered_terms))


async def _transfer_gone(paid: _Paid) -> None:
    paid.chain.rpc.call("anvil_rollback", [1])
    paid.chain.rpc.call("anvil_dropAllTransactions")


async def _delivered_unpaid(paid: _Paid) -> None:
    artifacts = '[{"artifactId": "a1", "name": "text-stats", "parts": [{"text": "free"}]}]'
    await paid.execute(
        "UPDATE tasks SET artifacts = CAST(:a AS json) WHERE id = :t", a=artifacts, t=paid.offered_task
    )


async def _reversed_after_delivery(paid: _Paid) -> None:
    engine = create_engine(paid.database_url)
    try:
        ledger = Ledger(engine, Outbox(engine))
        (entry,) = await ledger.unfinalized_settlements()
        await ledger.reverse_settlement(entry.id, reason="a reorg deeper than the depth, undeclared")
    finally:
        await engine.dispose()


async def _left_settling(paid: _Paid) -> None:
    await paid.execute("UPDATE payment_offers SET state = 'settling' WHERE task_id = :t", t=paid.paid_task)


async def _event_lost(paid: _Paid) -> None:
    await paid.execute("DELETE FROM webhook_events WHERE type = 'settlement.completed'")


async def _authorization_moved(paid: _Paid) -> None:
    await paid.execute(
        "UPDATE payment_presentations SET task_id = :other WHERE task_id = :t",
        other=paid.offered_task,
        t=paid.paid_task,
    )


async def _authorization_held_twice(paid: _Paid) -> None:
    # The schema refuses it (uq_payment_offers_authorization); the checker must not rely on that.
    await paid.execute("ALTER TABLE payment_offers DROP CONSTRAINT uq_payment_offers_authorization")
    await paid.execute(
        "UPDATE payment_offers SET payer = (SELECT payer FROM payment_offers WHERE task_id = :t), "
        "nonce = (SELECT nonce FROM payment_offers WHERE task_id = :t) WHERE task_id = :other",
        t=paid.paid_task,
        other=paid.offered_task,
    )


async def _presented_without_offer(paid: _Paid) -> None:
    await paid.execute("DELETE FROM payment_offers WHERE task_id = :t", t=paid.offered_task)
    await paid.execute(
        "INSERT INTO payment_presentations (payer, nonce, task_id, tenant, presented_at) "
        "VALUES (:p, :n, :t, '', CURRENT_TIMESTAMP)",
        p="0x" + "11" * 20,
        n="0x" + "22" * 32,
        t=paid.offered_task,
    )


BREAKS = [
    pytest.param(_unbooked_transfer, "1: transfer .* is booked 0 times", id="a transfer nobody booked"),
    pytest.param(_transfer_gone, "2: entry .* has no transfer on chain", id="a booking off the chain"),
    pytest.param(
        _delivered_unpaid,
        "3: task .* was delivered with its offer 'offered'",
        id="an artifact delivered unpaid",
    ),
    pytest.param(
        _reversed_after_delivery,
        "3: task .* was delivered, but its settlement was reversed",
        id="an artifact delivered on a settlement reversed later",
    ),
    pytest.param(_left_settling, "4: task .* is left undecided", id="a payment left settling"),
    pytest.param(_event_lost, "5: no settlement.completed event", id="a booking without its event"),
    pytest.param(
        _authorization_moved,
        r"(?s)6: the authorization task .* holds was presented for task .*6: entry .* books task",
        id="a booked authorization presented for another task",
    ),
    pytest.param(
        _authorization_held_twice,
        "6: the authorization of payer .* is held by the offers of tasks",
        id="one authorization held by two offers",
    ),
    pytest.param(
        _presented_without_offer,
        "6: task .* has a presented authorization but no offer",
        id="a presentation for a task stored without its offer",
    ),
]


async def test_a_clean_paid_turn_keeps_every_invariant(paid: _Paid) -> None:
    report = await paid.scenario.invariants(
        client_views={paid.paid_task: "TASK_STATE_COMPLETED", paid.offered_task: "TASK_STATE_INPUT_REQUIRED"}
    )
    assert (len(report.transfers), report.booked_tasks, report.events["settlement.completed"]) == (
        1,
        [paid.paid_task],
        1,
    )


@pytest.mark.parametrize(("breaking", "reported"), BREAKS)
async def test_each_broken_invariant_is_reported(
    breaking: Callable[[_Paid], Awaitable[None]], reported: str, paid: _Paid
) -> None:
    await breaking(paid)
    with pytest.raises(AssertionError, match=reported):
        await paid.scenario.invariants()


async def test_more_depth_than_the_chain_has_and_an_undecided_client_are_reported(paid: _Paid) -> None:
    with pytest.raises(
        AssertionError,
        match=r"(?s)2: entry .* is 1 blocks deep, 2 required.*3: task .* was delivered on a settlement 1 "
        r"blocks deep, 2 required.*4: the client",
    ):
        await paid.scenario.invariants(confirmations=2, client_views={paid.paid_task: "TASK_STATE_WORKING"})
