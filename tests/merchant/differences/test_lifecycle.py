"""The reconciler's differences have a lifecycle, on the real stack (anvil, SQLite and PostgreSQL): a
difference is stored when a pass finds it and stays open after the passes that no longer read its block;
the chain resolves it only with a reason (its transaction reorged out); a restarted chain (its genesis
block changed) is one difference and one log line, not a reorg per booking; each change is one short log
line, an operator's acknowledgement or booking too; the open ones are counted by kind on /metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from sqlalchemy import text

from a2a_x402.devchain import DevChain, start_devchain
from a2a_x402.merchant.differences import DifferenceState, Sighting, acknowledge_difference, book_difference
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    MerchantStarter,
    MerchantWire,
    offered_terms,
    payment_message,
    user_message,
)

from ..ledger.bookings import booking
from .helpers import Passes, unexplained_payment

_LONGEST_LINE = 700  # one line per difference: its key and a bounded detail


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name.startswith("a2a_x402.merchant")]


async def test_a_payment_no_offer_explains_stays_open_after_the_passes_that_no_longer_read_it(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings, nonce = await unexplained_payment(database_url, chain, start_merchant, new_payer)
    passes = Passes(settings)
    try:
        with caplog.at_level(logging.INFO, logger="a2a_x402.merchant"):
            first = await passes.run()
            # Deeper than confirmations + the reorg margin: the passes after the next do not read its block.
            chain.rpc.call("anvil_mine", [hex(200)])
            later = [await passes.run(), await passes.run(), await passes.run()]
        stored = await passes.all()
        counts = await passes.store.open_counts()
    finally:
        await passes.aclose()

    assert [d.kind for d in first.differences] == ["unbooked_payment"]
    assert [len(report.differences) for report in later] == [1, 0, 0]
    (difference,) = stored
    assert (difference.state, difference.kind, difference.pay_to) == (
        DifferenceState.OPEN,
        "unbooked_payment",
        DEFAULT_PAY_TO,
    )
    assert nonce in difference.key and difference.first_seen < difference.last_seen
    assert counts == {"unbooked_payment": 1}
    lines = _lines(caplog)
    (opened,) = [line for line in lines if line.startswith("difference ")]  # seen three times, said once
    assert opened.startswith(f"difference {difference.id} opened: unbooked_payment {difference.key}: ")
    assert all(len(line) < _LONGEST_LINE for line in lines), lines


async def test_a_payment_whose_transaction_reorged_out_is_resolved_by_the_chain_with_that_reason(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings, _ = await unexplained_payment(database_url, chain, start_merchant, new_payer)
    passes = Passes(settings)
    try:
        await passes.run()
        chain.rpc.call("anvil_rollback", [2])  # the payment's block and the one mined after it
        chain.rpc.call("anvil_dropAllTransactions")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="a2a_x402.merchant"):
            again = await passes.run()
            await passes.run()  # resolved already: nothing more is said
        (difference,) = await passes.all()
        counts = await passes.store.open_counts()
    finally:
        await passes.aclose()

    assert again.differences == []
    assert (difference.state, difference.resolved_by) == (DifferenceState.RESOLVED, "chain")
    assert difference.note == "reorged out: its transaction is no longer on the chain"
    assert difference.resolved_at is not None and counts == {}
    changes = [line for line in _lines(caplog) if line.startswith("difference ")]
    assert changes == [
        f"difference {difference.id} resolved by chain: unbooked_payment {difference.key}: {difference.note}"
    ], changes


async def test_a_restarted_chain_is_one_difference_and_one_line_not_a_reorg_per_booking(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings, _ = await unexplained_payment(database_url, chain, start_merchant, new_payer)
    passes = Passes(settings)
    try:
        await passes.run()  # the genesis block is stored; the payment is an open difference
        # The node restarts: its history is gone (the payment's block, every booked settlement's) and its
        # genesis block is another. Anvil's snapshot keeps the genesis, so the one the last pass read is
        # written as another chain's.
        chain.rpc.call("anvil_rollback", [2])  # the payment's block and the one mined after it
        engine = create_engine(settings.database_url)
        try:
            ledger = Ledger(engine, Outbox(engine))
            for _ in range(3):
                entry = await ledger.book_settlement(
                    booking(
                        tenant="",
                        pay_to=DEFAULT_PAY_TO,
                        asset=chain.asset,
                        network=chain.network,
                        chain_id=chain.chain_id,
                        block_number=1,
                    )
                )
                await ledger.mark_final(entry.id, confirmations=1)
            async with engine.begin() as connection:
                await connection.execute(
                    text("UPDATE reconcile_chain SET genesis_hash = :other"), {"other": "0x" + "ab" * 32}
                )
        finally:
            await engine.dispose()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="a2a_x402.merchant"):
            restarted = await passes.run()
            after = await passes.run()
        stored = {d.kind: d for d in await passes.all()}
        counts = await passes.store.open_counts()
    finally:
        await passes.aclose()

    (difference,) = restarted.differences
    assert (
        difference.kind == "chain_restarted"
        and "1 open differences about the old chain closed" in difference.text
    )
    assert after.differences == []  # bookings made before the restart are not reported as reorged away
    assert counts == {"chain_restarted": 1}
    assert (stored["unbooked_payment"].state, stored["unbooked_payment"].note) == (
        DifferenceState.RESOLVED,
        "the chain restarted",
    )
    lines = [line for line in _lines(caplog) if "difference" in line or "reorg" in line]
    assert lines == [
        f"difference {stored['chain_restarted'].id} opened: chain_restarted {difference.key}: "
        f"{difference.text}"
    ], lines


async def test_a_dev_chain_started_afresh_is_recognised_by_its_genesis_and_its_bookings_are_not_reorgs(
    database_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    merchant = start_merchant(database_url)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        payload = sign_payment(new_payer(), offered_terms(task).accepts[0])
        done = (await wire.send(payment_message(task["id"], payload)))["task"]
    merchant.stop()
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    old = Passes(merchant.settings)
    try:
        await old.run()  # the booking is finalized; the chain's genesis block is stored
    finally:
        await old.aclose()
    # The operator restarts the dev chain: a new anvil, the token deployed at the same address, no history.
    with start_devchain(payers=0) as fresh:
        assert fresh.asset == chain.asset
        passes = Passes(merchant.settings.model_copy(update={"rpc_url": fresh.rpc_url}))
        try:
            restarted = await passes.run()
            after = await passes.run()
            counts = await passes.store.open_counts()
        finally:
            await passes.aclose()

    assert [d.kind for d in restarted.differences] == ["chain_restarted"], restarted.unresolved
    assert after.differences == [] and counts == {"chain_restarted": 1}


async def test_an_operator_s_acknowledgement_and_booking_are_each_one_line_naming_the_difference(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings, _ = await unexplained_payment(database_url, chain, start_merchant, new_payer)
    passes = Passes(settings)
    try:
        await passes.run()
        await passes.store.sighted([Sighting(kind="reorged_out", key="entry-x", detail="x", tenant="")])
        payment, other = sorted(await passes.all(), key=lambda d: d.kind != "unbooked_payment")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="a2a_x402.merchant"):
            entry = await book_difference(
                passes.store,
                Ledger(passes.engine, Outbox(passes.engine)),
                payment.id,
                tenant="",
                tenant_pay_to=DEFAULT_PAY_TO,
                network=settings.network,
                note="a customer paid by hand",
                by="ops",
            )
            await acknowledge_difference(passes.store, other.id, note="a test\nreorg", by="ops")
    finally:
        await passes.aclose()

    changes = [line for line in _lines(caplog) if line.startswith("difference ")]
    assert changes == [
        f"difference {payment.id} booked by ops: unbooked_payment {payment.key}: "
        f"a customer paid by hand (booked as {entry.id})",
        f"difference {other.id} acknowledged by ops: reorged_out entry-x: a test reorg",
    ]
