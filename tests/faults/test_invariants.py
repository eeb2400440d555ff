"""The invariant checker bites: each invariant, broken on purpose after a clean paid turn, is reported.

A payment by Permit2 (`exact`, `upto`) is found on chain by the proxy call's permit, and a metered one is
held to what its work used; each is checked clean, then broken. So is a payment made with AP2 mandates:
its booking's references, its round's one use and its open mandate's counted total (invariant 8).

(The merchant runs in-process here: the checker, not the process model, is under test.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import PaymentRequirements
from a2a_x402.merchant.demo_skill import TextStatsExecutor
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.devchain.permit2_sdk import EXACT, UPTO, permit_of, send
from tests.facilitator.payments import submit_directly
from tests.fixtures.merchant import MerchantStarter, MerchantWire

from .clients import open_offer, open_task, pay
from .conftest import Scenario
from .metered_serve import TokenCountingExecutor
from .payments import AP2, PERMIT2, UPTO_NOTHING, PaymentKind
from .payments import UPTO as UPTO_USED


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


async def _paid_by(kind: PaymentKind, scenario: Scenario, start_merchant: MerchantStarter) -> _Paid:
    """A paid task by `kind` and a second one offered (its terms signed by the same payer later)."""
    delegate = TokenCountingExecutor(kind.tokens) if kind.metered else TextStatsExecutor()
    settings = kind.settings(scenario.chain, scenario.workdir)
    merchant = start_merchant(scenario.database_url, delegate=delegate, **settings)
    payer_key = scenario.new_payer(kind)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        paid_task, terms, checkout = await open_offer(wire)
        signed = kind.sign(payer_key, terms, checkout=checkout)
        answer = await pay(wire, paid_task, signed.wire, signed.mandates)
        assert answer["status"]["state"] == "TASK_STATE_COMPLETED", answer["status"]
        offered_task, offered_terms = await open_task(wire)
    merchant.stop()
    return _Paid(scenario, paid_task, offered_task, offered_terms, payer_key)


@pytest.mark.parametrize("kind", [PERMIT2.param(), UPTO_USED.param(), UPTO_NOTHING.param()])
async def test_a_clean_permit2_turn_keeps_every_invariant_found_by_its_permit(
    kind: PaymentKind, scenario: Scenario, start_merchant: MerchantStarter
) -> None:
    paid = await _paid_by(kind, scenario, start_merchant)

    report = await scenario.invariants(client_views={paid.paid_task: "TASK_STATE_COMPLETED"})

    if kind.sends_nothing:
        assert (report.transfers, report.booked_tasks, report.events["settlement.completed"]) == ([], [], 0)
        return
    [transfer] = report.transfers
    assert (transfer.asset, transfer.amount, transfer.nonce[:2]) == (
        kind.asset(scenario.chain),
        kind.charged,
        "p2",
    )
    assert report.booked_tasks == [paid.paid_task]


async def test_a_permit2_transfer_nobody_booked_is_reported(
    scenario: Scenario, start_merchant: MerchantStarter
) -> None:
    paid = await _paid_by(PERMIT2, scenario, start_merchant)
    signed = PERMIT2.sign(paid.payer_key, paid.offered_terms)
    # Anyone may send an `exact` permit to its proxy: here the deployer, for a task still offered.
    send(scenario.chain, scenario.chain.deployer_key, EXACT, "settle", [*permit_of(signed.wire["payload"])])

    with pytest.raises(AssertionError, match=r"1: transfer .* \(payer .*, nonce p2.*\) is booked 0 times"):
        await scenario.invariants()


async def test_a_metered_booking_of_other_than_the_usage_is_reported(
    scenario: Scenario, start_merchant: MerchantStarter
) -> None:
    paid = await _paid_by(UPTO_USED, scenario, start_merchant)
    # The stored usage says the work used all it was signed for: the booking and the transfer (of what it
    # really used) no longer match it.
    usage = (
        '{"maximum": "500000", "settled": "500000", '
        '"items": [{"name": "tokens", "quantity": "20000", "unitPrice": "25", "amount": "500000"}]}'
    )
    await paid.execute(
        "UPDATE payment_offers SET usage = CAST(:u AS json) WHERE task_id = :t", u=usage, t=paid.paid_task
    )

    with pytest.raises(
        AssertionError,
        match=r"(?s)7: entry .* books task .* 175 of a maximum 500000, its work used 500000 of 500000"
        r".*7: 0x.* charged task .* 175, its work used 500000",
    ):
        await scenario.invariants()


async def test_a_metered_turn_that_used_nothing_but_was_charged_is_reported(
    scenario: Scenario, start_merchant: MerchantStarter
) -> None:
    paid = await _paid_by(UPTO_NOTHING, scenario, start_merchant)
    [permit, owner, witness, signature] = permit_of(
        await _presented_payload(paid.database_url, paid.paid_task)
    )
    # The facilitator the witness names (the relayer) settles 1 of the maximum after all.
    send(scenario.chain, scenario.chain.relayer_key, UPTO, "settle", [permit, 1, owner, witness, signature])

    with pytest.raises(
        AssertionError,
        match=r"(?s)1: transfer .* is booked 0 times.*7: task .* used nothing, yet 0x.* charged it"
        r".*7: task .* used nothing, yet its permit is spent on chain",
    ):
        await scenario.invariants()


async def _presented_payload(database_url: str, task_id: str) -> dict[str, object]:
    """The signed payload the offer of `task_id` holds."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            statement = sa.text("SELECT payload FROM payment_offers WHERE task_id = :t")
            payment = (await connection.execute(statement, {"t": task_id})).scalar_one()
    finally:
        await engine.dispose()
    return dict(payment["payload"])


async def test_a_clean_ap2_turn_keeps_every_invariant(
    scenario: Scenario, start_merchant: MerchantStarter
) -> None:
    paid = await _paid_by(AP2, scenario, start_merchant)

    report = await scenario.invariants(client_views={paid.paid_task: "TASK_STATE_COMPLETED"})

    assert report.booked_tasks == report.ap2_booked_tasks == [paid.paid_task]


async def _use_of_another_checkout(paid: _Paid) -> None:
    await paid.execute("UPDATE ap2_mandate_uses SET checkout_hash = :h", h="A" * 43)


async def _use_doubled(paid: _Paid) -> None:
    # A recovery counting the round's payment a second time: another use of the same round, counted. The
    # schema refuses a second live use of a round (uq_ap2_mandate_uses_live_round); the checker must not
    # rely on that.
    await paid.execute("DROP INDEX uq_ap2_mandate_uses_live_round")
    await paid.execute(
        "INSERT INTO ap2_mandate_uses SELECT :r, open_mandate, tenant, task_id, round, checkout_hash, "
        "amount, state, reserved_at, decided_at FROM ap2_mandate_uses",
        r="B" * 43,
    )
    await paid.execute("UPDATE ap2_mandate_usage SET total = total * 2, uses = uses * 2")


async def _total_counted_twice(paid: _Paid) -> None:
    await paid.execute("UPDATE ap2_mandate_usage SET total = total * 2")


async def _failed_round_still_counted(paid: _Paid) -> None:
    # The offered task's round ended failed, but the use its mandates reserved was never released.
    await paid.execute(
        "INSERT INTO ap2_mandate_uses SELECT :r, open_mandate, tenant, :t, 1, checkout_hash, amount, "
        "'reserved', reserved_at, NULL FROM ap2_mandate_uses",
        r="C" * 43,
        t=paid.offered_task,
    )
    await paid.execute("UPDATE ap2_mandate_usage SET total = total * 2, uses = uses + 1")
    await paid.execute("UPDATE payment_offers SET state = 'failed' WHERE task_id = :t", t=paid.offered_task)
    failed = '{"state": "TASK_STATE_FAILED"}'
    await paid.execute(
        "UPDATE tasks SET status = CAST(:s AS json) WHERE id = :t", s=failed, t=paid.offered_task
    )


@pytest.mark.parametrize(
    ("breaking", "reported"),
    [
        pytest.param(
            _use_of_another_checkout,
            r"(?s)8: entry .* carries the AP2 references .*, its round's use .*"
            r"8: task .* counts a use of another checkout",
            id="a use row corrupted",
        ),
        pytest.param(
            _use_doubled,
            r"(?s)8: task .* round 1 is paid with 2 uses that count, not one.*"
            r"8: open mandate .* counts 50, the settlements booked under it come to 25 in 1",
            id="a paid round's use doubled",
        ),
        pytest.param(
            _total_counted_twice,
            r"(?s)8: open mandate .* counts 50 in 1 uses, its uses that count 25 in 1.*"
            r"8: open mandate .* counts 50, the settlements booked under it come to 25 in 1",
            id="an open mandate's total counted twice",
        ),
        pytest.param(
            _failed_round_still_counted,
            r"(?s)8: open mandate .* counts 50, the settlements booked under it come to 25.*"
            r"8: task .* round 1 ended failed with nothing settled, yet its use C+ still counts \(reserved\)",
            id="a failed round's use not released",
        ),
    ],
)
async def test_each_broken_ap2_invariant_is_reported(
    breaking: Callable[[_Paid], Awaitable[None]],
    reported: str,
    scenario: Scenario,
    start_merchant: MerchantStarter,
) -> None:
    paid = await _paid_by(AP2, scenario, start_merchant)
    await breaking(paid)

    with pytest.raises(AssertionError, match=reported):
        await scenario.invariants()
