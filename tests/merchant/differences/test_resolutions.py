"""Each way the chain resolves a stored difference, on the real stack (anvil, SQLite and PostgreSQL): the
difference closes as `resolved` by the chain with the reason recorded in its note, said in one log line.

The reasons (`merchant._difference_checks`): a payment the ledger lacked is in the ledger now; the chain
answered again; recovery no longer finds a task's settlement unbooked; a transaction that left the chain
is on it again. (A transaction that reorged out, and a restarted chain, are in `test_lifecycle`.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.differences import DifferenceState, StoredDifference
from a2a_x402.merchant.ledger import Ledger, LedgerReader, SettlementBooking
from a2a_x402.merchant.payments._offer_table import offers_table
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.payer import sign_payment
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    offered_terms,
    payment_message,
    user_message,
)
from tests.fixtures.servers import free_port

from .helpers import Passes, unexplained_payment


def _changes(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The differences' changes logged (one line each)."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("a2a_x402.merchant") and record.getMessage().startswith("difference ")
    ]


def _resolved_line(difference: StoredDifference) -> str:
    return (
        f"difference {difference.id} resolved by chain: {difference.kind} {difference.key}: {difference.note}"
    )


def _closed_by_chain(difference: StoredDifference, note: str) -> None:
    assert (difference.state, difference.resolved_by, difference.note) == (
        DifferenceState.RESOLVED,
        "chain",
        note,
    )
    assert difference.resolved_at is not None


async def _paid_task(start_merchant: MerchantStarter, database_url: str, payer: str) -> RunningMerchant:
    """A merchant (stopped again) on `database_url` that was paid for one task."""
    merchant = start_merchant(database_url)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        payload = sign_payment(payer, offered_terms(task).accepts[0])
        done = (await wire.send(payment_message(task["id"], payload)))["task"]
    merchant.stop()
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    return merchant


async def test_a_payment_the_ledger_lacked_is_resolved_once_the_ledger_has_it(
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
        (opened,) = await passes.all()
        facts = opened.facts
        # Booked by other means than this difference (say, a late booking by another replica).
        await Ledger(passes.engine, Outbox(passes.engine)).book_settlement(
            SettlementBooking(
                tenant="",
                task_id="booked-elsewhere",
                context_id="booked-elsewhere",
                payer=facts["payer"],
                pay_to=facts["pay_to"],
                asset=facts["asset"],
                network=chain.network,
                chain_id=facts["chain_id"],
                amount=facts["amount"],
                nonce=facts["nonce"],
                tx_hash=facts["tx_hash"],
                block_number=facts["block_number"],
                settled_at=datetime.now(UTC),
            )
        )
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="a2a_x402.merchant"):
            again = await passes.run()
        (difference,) = await passes.all()
    finally:
        await passes.aclose()

    assert opened.kind == "unbooked_payment" and again.differences == []
    _closed_by_chain(difference, "the transfer is in the ledger now")
    assert _changes(caplog) == [_resolved_line(difference)]


async def test_a_chain_that_could_not_be_read_is_resolved_when_it_answers_again(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    merchant = start_merchant(database_url)
    merchant.stop()
    unreachable = Passes(merchant.settings.model_copy(update={"rpc_url": f"http://127.0.0.1:{free_port()}"}))
    try:
        down = await unreachable.run()
        (opened,) = await unreachable.all()
    finally:
        await unreachable.aclose()
    passes = Passes(merchant.settings)
    try:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="a2a_x402.merchant"):
            up = await passes.run()
        (difference,) = await passes.all()
    finally:
        await passes.aclose()

    assert {d.kind for d in down.differences} == {"chain_unavailable"}
    assert (opened.kind, opened.tenant, opened.pay_to) == ("chain_unavailable", None, None)
    assert up.differences == []
    _closed_by_chain(difference, "the chain answered again")
    assert _changes(caplog) == [_resolved_line(difference)]


async def test_a_settlement_recovery_could_not_prove_is_resolved_once_it_no_longer_awaits_booking(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    merchant = await _paid_task(start_merchant, database_url, new_payer())
    # The offer's receipt names a transaction that moved nothing (as a faulty facilitator might) and its
    # booking is not recorded: recovery tries to book it, and the chain does not show it paid the offer.
    accounts = chain.rpc.call("eth_accounts")
    unrelated = chain.rpc.call(
        "eth_sendTransaction", [{"from": accounts[0], "to": accounts[0], "value": "0x0"}]
    )
    passes = Passes(merchant.settings)
    try:
        async with passes.engine.begin() as connection:
            (task_id, receipts) = (
                await connection.execute(sa.select(offers_table.c.task_id, offers_table.c.receipts))
            ).one()
            booked_at = (await connection.execute(sa.select(offers_table.c.booked_at))).scalar_one()
            await connection.execute(
                sa.update(offers_table).values(
                    booked_at=None, receipts=[*receipts[:-1], {**receipts[-1], "transaction": unrelated}]
                )
            )
        await passes.run()
        (opened,) = await passes.all()
        # It is booked after all (the operator, or a replica, recorded the booking).
        async with passes.engine.begin() as connection:
            await connection.execute(sa.update(offers_table).values(booked_at=booked_at, receipts=receipts))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="a2a_x402.merchant"):
            again = await passes.run()
        (difference,) = await passes.all()
    finally:
        await passes.aclose()

    assert (opened.kind, opened.key) == ("recovery_unproven", f"task {task_id}")
    assert again.differences == []
    _closed_by_chain(difference, "its task's settlement no longer awaits booking")
    assert _changes(caplog) == [_resolved_line(difference)]


async def test_a_booking_whose_transaction_left_the_chain_is_resolved_when_it_is_on_the_chain_again(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    merchant = await _paid_task(start_merchant, database_url, new_payer())
    passes = Passes(merchant.settings)
    try:
        (record,) = await LedgerReader(passes.engine).settlements("")
        entry = record.entry
        await passes.run()  # finalized at the configured depth
        # A reorg takes the settlement's block away. The facilitator puts the same transaction back in the
        # pool (its claim's reconcile), where it waits, off the chain, until the next block.
        head = int(chain.rpc.call("eth_blockNumber"), 16)
        chain.rpc.call("evm_setAutomine", [False])
        try:
            chain.rpc.call("anvil_rollback", [head - entry.block_number + 1])
            chain.rpc.call("anvil_dropAllTransactions")
            left = await passes.run()
            (opened,) = await passes.all()
            chain.rpc.call("evm_mine")
        finally:
            chain.rpc.call("evm_setAutomine", [True])
        assert chain.rpc.call("eth_getTransactionReceipt", [entry.tx_hash])["status"] == "0x1"
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="a2a_x402.merchant"):
            back = await passes.run()
        (difference,) = await passes.all()
    finally:
        await passes.aclose()

    assert [d.kind for d in left.differences] == ["reorged_out"]
    assert (opened.kind, opened.key, opened.pay_to) == ("reorged_out", entry.id, DEFAULT_PAY_TO)
    assert back.differences == []
    _closed_by_chain(difference, "its transaction is on the chain again")
    assert _changes(caplog) == [_resolved_line(difference)]
