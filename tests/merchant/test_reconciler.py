"""The reconciler on the real stack: a paid turn whose merchant stopped mid-settlement is finished by
another process (settled, booked, delivered exactly once); bookings are finalized at depth; a settlement a
reorg removed for good is reversed; a paid task the ledger missed is booked; a task that never heard how
its payment was decided (failed, declined) is told. A reconciler's later passes read only the new blocks
and those a reorg may still change; only this chain's bookings to watched payees are held against it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest
from a2a.server.tasks import InMemoryTaskStore

from a2a_x402.devchain import DevChain
from a2a_x402.extension import PaymentCompletedData, PaymentErrorCode, PaymentFailedData, PaymentRejectedData
from a2a_x402.facilitator import Facilitator
from a2a_x402.merchant.differences import DifferenceStore
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.payments import OfferStore, PaymentRecovery
from a2a_x402.merchant.reconciler import Reconciler, ReconcileReport
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.merchant.wiring import build_reconciler
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.payments import submit_directly, tampered
from tests.facilitator.permit2_chain import funded_payer, sdk_sign
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    ledger_entries,
    offered_terms,
    payment_data,
    payment_message,
    rejection_message,
    user_message,
)

from .ledger.bookings import booking
from .recording_rpc import RecordingRpc


async def _reconcile(settings: MerchantSettings) -> tuple[int, int, int, int]:
    """One reconciliation pass: (turns finished, booked late, finalized, reversed)."""
    report = await _reconcile_report(settings)
    return report.turns_finished, report.booked_late, report.finalized, report.reversed


async def _reconcile_report(settings: MerchantSettings) -> ReconcileReport:
    report = await _reconcile_any(settings)
    assert report.unresolved == []
    return report


@contextlib.asynccontextmanager
async def open_reconciler(settings: MerchantSettings) -> AsyncIterator[tuple[Reconciler, DifferenceStore]]:
    """A reconciler on `settings` storing its differences, and that store; all closed after."""
    engine = create_engine(settings.database_url)
    facilitator = Facilitator.from_settings(settings.facilitator_settings(), engine=engine)
    try:
        reconciler = build_reconciler(
            settings,
            engine=engine,
            facilitator=facilitator,
            offers=OfferStore(engine),
            ledger=Ledger(engine, Outbox(engine)),
        )
        try:
            yield reconciler, DifferenceStore(engine)
        finally:
            await reconciler.aclose()
    finally:
        await facilitator.aclose()
        await engine.dispose()


async def _reconcile_any(settings: MerchantSettings) -> ReconcileReport:
    """One reconciliation pass, whatever it leaves unresolved."""
    async with open_reconciler(settings) as (reconciler, _):
        return await reconciler.run_once()


async def test_a_settlement_left_pending_by_a_stopped_merchant_is_finished_by_the_reconciler(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    first = start_merchant(sqlite_url, settle_timeout_s=0.5, reconcile_stale_after_s=0.1)
    async with first.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        payload = sign_payment(new_payer(), offered_terms(task).accepts[0])
        chain.rpc.call("evm_setAutomine", [False])
        working = (await wire.send(payment_message(task["id"], payload)))["task"]
    assert working["status"]["state"] == "TASK_STATE_WORKING"
    first.stop()  # the process that owned the settlement is gone; its transaction is still in the pool
    chain.rpc.call("evm_mine")
    payee_before = chain.balance_of(DEFAULT_PAY_TO)

    # Finished (settled, booked, delivered) and, the block being mined, finalized in the same pass.
    assert await _reconcile(first.settings) == (1, 0, 1, 0)

    await _assert_completed(start_merchant, sqlite_url, task["id"])
    entries = await ledger_entries(sqlite_url)
    assert [(e.task_id, e.amount) for e in entries] == [(task["id"], offered_terms(task).accepts[0].amount)]
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before  # mined before: nothing was paid twice
    assert await _reconcile(first.settings) == (0, 0, 0, 0)  # nothing left to do


async def _assert_completed(start_merchant: MerchantStarter, database_url: str, task_id: str) -> None:
    """The task, read through a merchant started on `database_url`, completed with its one artifact and a
    successful settlement receipt."""
    merchant = start_merchant(database_url)
    async with merchant.http() as http:
        done = await MerchantWire(http, "jsonrpc").get_task(task_id)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["name"] for a in done["artifacts"]] == ["text-stats"]
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData) and completed.receipts[-1].success


async def _paid_and_booked(
    sqlite_url: str, start_merchant: MerchantStarter, new_payer: Callable[..., str], valid_for_s: int
) -> tuple[MerchantSettings, int, int]:
    """A paid task on a merchant that then stops; returns its settings, the amount and validBefore."""
    merchant = start_merchant(sqlite_url)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        terms = offered_terms(task).accepts[0]
        payload = sign_payment(new_payer(), terms, valid_before=int(time.time()) + valid_for_s)
        done = (await wire.send(payment_message(task["id"], payload)))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    merchant.stop()
    return merchant.settings, terms.amount, payload.payload.authorization.valid_before


def _reorg_out(chain: DevChain, tx_hash: str) -> None:
    """A reorg takes the settlement's block away, and its transaction with it."""
    chain.rpc.call("anvil_rollback", [1])
    chain.rpc.call("anvil_dropAllTransactions")
    assert chain.rpc.call("eth_getTransactionReceipt", [tx_hash]) is None


async def test_a_settlement_a_reorg_removed_is_put_back_and_finalized(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    settings, amount, _ = await _paid_and_booked(sqlite_url, start_merchant, new_payer, valid_for_s=120)
    (entry,) = await ledger_entries(sqlite_url)
    payee_before = chain.balance_of(DEFAULT_PAY_TO)
    _reorg_out(chain, entry.tx_hash)
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before - amount

    # The facilitator broadcasts the same signed transaction again; it is re-included and reaches depth.
    assert await _reconcile(settings) == (0, 0, 1, 0)

    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before
    receipt = chain.rpc.call("eth_getTransactionReceipt", [entry.tx_hash])
    assert int(receipt["status"], 16) == 1


async def paid_by_permit2(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter
) -> tuple[MerchantSettings, str]:
    """A task paid by Permit2 on a merchant that then stops: the merchant's settings and the task's id."""
    merchant = start_merchant(sqlite_url, asset=chain.plain_asset)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        payment = sdk_sign(chain, funded_payer(chain, chain.plain_asset), offered_terms(task).accepts[0])
        done = (await wire.send(payment_message(task["id"], payment)))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    merchant.stop()
    return merchant.settings, str(task["id"])


async def test_a_permit2_settlement_is_finalized_and_never_taken_for_one_a_reorg_removed(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter
) -> None:
    # The chain scan reads the Permit2 payment under its ledger key (`p2…`): it agrees with its booking, and
    # once finalized is not taken for one a reorg removed (tests/merchant/test_reconciler_permit2.py).
    settings, task_id = await paid_by_permit2(sqlite_url, chain, start_merchant)

    assert await _reconcile(settings) == (0, 0, 1, 0)
    assert await _reconcile(settings) == (0, 0, 0, 0)  # and no difference, either pass
    [entry] = await ledger_entries(sqlite_url)
    assert (entry.task_id, entry.asset) == (task_id, chain.plain_asset)


async def test_a_booking_whose_transaction_left_the_chain_for_good_is_reversed(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    settings, amount, valid_before = await _paid_and_booked(
        sqlite_url, start_merchant, new_payer, valid_for_s=9
    )
    (entry,) = await ledger_entries(sqlite_url)
    chain.rpc.call("evm_setAutomine", [False])  # nothing is mined again
    _reorg_out(chain, entry.tx_hash)

    assert await _reconcile(settings) == (0, 0, 0, 0)  # still valid: it may land again

    await asyncio.sleep(max(valid_before + 1 - time.time(), 0))  # the authorization expires
    chain.rpc.call("anvil_dropAllTransactions")
    assert await _reconcile(settings) == (0, 0, 0, 1)
    engine = create_engine(sqlite_url)
    try:
        statement = await Ledger(engine, Outbox(engine)).statement("")
    finally:
        await engine.dispose()
    assert [(line.direction, line.amount, line.status.value) for line in statement] == [
        ("credit", amount, "reversed"),
        ("debit", amount, "reversed"),
    ]


async def _sql(database_url: str, *statements: str) -> list[object]:
    """Run `statements` in one transaction; the first column of each one's first row (None without)."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            results = [await connection.exec_driver_sql(s) for s in statements]
            return [r.scalar() if r.returns_rows else None for r in results]
    finally:
        await engine.dispose()


_UNBOOKED = "SELECT count(*) FROM payment_offers WHERE state = 'paid' AND booked_at IS NULL"


async def _paid_unbooked(
    sqlite_url: str, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> tuple[MerchantSettings, int]:
    """A paid task the ledger refused to book, as a database that cannot take the write would (trigger
    `refuse_bookings`, left in place); returns the merchant's settings and the amount."""
    await _sql(
        sqlite_url,
        "CREATE TRIGGER refuse_bookings BEFORE INSERT ON ledger_entries"
        " BEGIN SELECT RAISE(ABORT, 'the ledger is unavailable'); END",
    )
    settings, amount, _ = await _paid_and_booked(sqlite_url, start_merchant, new_payer, valid_for_s=120)
    return settings, amount


@pytest.mark.error_logs("why: a trigger makes the ledger refuse the booking")
async def test_a_paid_task_the_ledger_missed_is_booked_late_once_and_then_left_alone(
    sqlite_url: str, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    settings, amount = await _paid_unbooked(sqlite_url, start_merchant, new_payer)
    assert await ledger_entries(sqlite_url) == []  # delivered all the same: the payer paid
    assert await _sql(sqlite_url, _UNBOOKED) == [1]

    await _sql(sqlite_url, "DROP TRIGGER refuse_bookings")
    assert (await _reconcile(settings))[1] == 1
    assert [entry.amount for entry in await ledger_entries(sqlite_url)] == [amount]
    assert await _sql(sqlite_url, _UNBOOKED) == [0]
    assert (await _reconcile(settings))[1] == 0

    # A paid offer recorded before offers carried `booked_at` (migration m0004): already in the ledger, it
    # is marked on the next pass and not booked again.
    await _sql(sqlite_url, "UPDATE payment_offers SET booked_at = NULL")
    assert (await _reconcile(settings))[1] == 0
    assert await _sql(sqlite_url, _UNBOOKED) == [0]
    assert [entry.amount for entry in await ledger_entries(sqlite_url)] == [amount]


@pytest.mark.error_logs("why: a trigger makes the task store refuse the task's final state")
@pytest.mark.parametrize(
    ("outcome", "offer_state", "task_state"),
    [
        pytest.param("forged", "failed", "TASK_STATE_FAILED", id="payment failed"),
        pytest.param("declined", "rejected", "TASK_STATE_CANCELED", id="terms declined"),
    ],
)
async def test_a_task_that_never_heard_how_its_payment_was_decided_is_told_by_the_reconciler(
    outcome: str,
    offer_state: str,
    task_state: str,
    sqlite_url: str,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
) -> None:
    # The task store refuses to store the task's final state, as a database lost between the offer's write
    # and the task's would: the offer is decided, the task never hears of it.
    await _sql(
        sqlite_url,
        "CREATE TRIGGER refuse_final_tasks BEFORE UPDATE ON tasks"
        f" WHEN json_extract(NEW.status, '$.state') = '{task_state}'"
        " BEGIN SELECT RAISE(ABORT, 'the task store is unavailable'); END",
    )
    merchant = start_merchant(sqlite_url, reconcile_stale_after_s=0.1)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        terms = offered_terms(task).accepts[0]
        if outcome == "forged":
            other = sign_payment(new_payer(), terms)
            message = payment_message(
                task["id"], tampered(sign_payment(new_payer(), terms), signature=other.payload.signature)
            )
        else:
            message = rejection_message(task["id"])
        with contextlib.suppress(A2ACallError):
            await wire.send(message)
    merchant.stop()
    untold = "SELECT state FROM payment_offers WHERE told_at IS NULL"
    assert await _sql(sqlite_url, untold, "SELECT json_extract(status, '$.state') FROM tasks") == [
        offer_state,
        "TASK_STATE_INPUT_REQUIRED",  # still showing the terms
    ]

    await _sql(sqlite_url, "DROP TRIGGER refuse_final_tasks")
    await asyncio.sleep(0.2)  # the offer is older than the reconciler's staleness cutoff
    assert (await _reconcile_report(merchant.settings)).told_late == 1

    restarted = start_merchant(sqlite_url)
    async with restarted.http() as http:
        told = await MerchantWire(http, "jsonrpc").get_task(task["id"])
    assert told["status"]["state"] == task_state
    decided = payment_data(told)
    if outcome == "forged":
        assert isinstance(decided, PaymentFailedData) and decided.error == PaymentErrorCode.INVALID_SIGNATURE
    else:
        assert isinstance(decided, PaymentRejectedData)
    assert await _sql(sqlite_url, untold) == [None]
    assert (await _reconcile_report(merchant.settings)).told_late == 0


@pytest.mark.parametrize(
    "left_as",
    [
        # The SDK fails a task whose events it could not store, with no message and its artifacts gone.
        pytest.param(
            "UPDATE tasks SET status = json_object('state', 'TASK_STATE_FAILED'), artifacts = '[]'",
            id="ended failed by the SDK",
        ),
        # The process stopped between storing the artifact and the completion.
        pytest.param(
            "UPDATE tasks SET status = json_object('state', 'TASK_STATE_WORKING')",
            id="artifacts stored, completion lost",
        ),
    ],
)
async def test_a_paid_task_that_did_not_end_completed_is_completed_once_with_its_artifacts(
    left_as: str,
    sqlite_url: str,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
) -> None:
    merchant = start_merchant(sqlite_url, reconcile_stale_after_s=0.1)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        payload = sign_payment(new_payer(), offered_terms(task).accepts[0])
        assert (await wire.send(payment_message(task["id"], payload)))["task"]["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )
    merchant.stop()
    await _sql(sqlite_url, left_as, "UPDATE payment_offers SET told_at = NULL")

    await asyncio.sleep(0.2)  # the offer is older than the reconciler's staleness cutoff
    assert (await _reconcile_report(merchant.settings)).told_late == 1

    await _assert_completed(start_merchant, sqlite_url, task["id"])
    assert len(await ledger_entries(sqlite_url)) == 1
    assert (await _reconcile_report(merchant.settings)).told_late == 0


async def test_a_decided_offer_whose_task_is_missing_stays_untold(
    sqlite_url: str, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    merchant = start_merchant(sqlite_url, reconcile_stale_after_s=0.1)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        await wire.send(
            payment_message(task["id"], sign_payment(new_payer(), offered_terms(task).accepts[0]))
        )
    merchant.stop()
    untold = "SELECT count(*) FROM payment_offers WHERE told_at IS NULL"
    await _sql(sqlite_url, "DELETE FROM tasks", "UPDATE payment_offers SET told_at = NULL")

    await asyncio.sleep(0.2)
    assert (await _reconcile_report(merchant.settings)).told_late == 0
    assert await _sql(sqlite_url, untold) == [1]  # left for an operator, not marked told


async def test_a_payment_to_the_payee_that_no_offer_was_paid_with_is_reported_and_not_booked(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    merchant = start_merchant(sqlite_url)
    async with merchant.http() as http:
        task = (await MerchantWire(http, "jsonrpc").send(user_message()))["task"]
    merchant.stop()
    # The payer's authorization, for the offered terms, goes to the chain without the merchant.
    payload = sign_payment(new_payer(), offered_terms(task).accepts[0])
    submit_directly(chain, payload)
    chain.rpc.call("evm_mine")
    # Older than the configured lookback, it is not read at all.
    narrow = merchant.settings.model_copy(update={"reconcile_lookback_blocks": 1})
    assert (await _reconcile_any(narrow)).unresolved == []

    report = await _reconcile_any(merchant.settings)

    (problem,) = report.unresolved
    nonce = payload.payload.authorization.nonce
    assert f"paid to {DEFAULT_PAY_TO}" in problem and nonce in problem and "no offer was paid" in problem
    assert (report.booked_from_chain, await ledger_entries(sqlite_url)) == (0, [])


async def test_a_reconcilers_differences_are_stored_for_the_tenant_they_concern_only(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    merchant = start_merchant(sqlite_url)
    async with merchant.http() as http:
        task = (await MerchantWire(http, "jsonrpc").send(user_message()))["task"]
    merchant.stop()
    submit_directly(chain, sign_payment(new_payer(), offered_terms(task).accepts[0]))
    chain.rpc.call("evm_mine")
    engine = create_engine(sqlite_url)
    store = DifferenceStore(engine)
    facilitator = Facilitator.from_settings(merchant.settings.facilitator_settings(), engine=engine)
    reconciler = build_reconciler(
        merchant.settings,
        engine=engine,
        facilitator=facilitator,
        offers=OfferStore(engine),
        ledger=Ledger(engine, Outbox(engine)),
    )
    try:
        before = (reconciler.last_pass_at, await store.listed(tenant_or_payee=("", DEFAULT_PAY_TO)))
        report = await reconciler.run_once()
        mine = await store.listed(tenant_or_payee=("", DEFAULT_PAY_TO))
        others = await store.listed(tenant_or_payee=("acme", PAY_TO))
    finally:
        await reconciler.aclose()
        await facilitator.aclose()
        await engine.dispose()

    assert before == (None, [])
    assert reconciler.last_pass_at is not None
    (difference,) = report.differences
    assert (difference.tenant, difference.pay_to) == (None, DEFAULT_PAY_TO)  # a payment no offer explains
    assert [(d.kind, d.key, d.detail) for d in mine] == [(difference.kind, difference.key, difference.text)]
    assert report.unresolved == [difference.text]
    assert others == []


@pytest.mark.error_logs("why: a trigger makes the ledger refuse the booking")
async def test_a_paid_task_whose_booking_was_lost_is_booked_from_the_chain_once(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    settings, amount = await _paid_unbooked(sqlite_url, start_merchant, new_payer)
    # The offer says booked, the ledger has nothing (say, the ledger was restored from an older backup):
    # only the chain shows the payment.
    await _sql(
        sqlite_url, "DROP TRIGGER refuse_bookings", "UPDATE payment_offers SET booked_at = CURRENT_TIMESTAMP"
    )
    assert await ledger_entries(sqlite_url) == []

    report = await _reconcile_report(settings)

    assert (report.booked_late, report.booked_from_chain, report.finalized) == (0, 1, 1)
    (entry,) = await ledger_entries(sqlite_url)
    assert (entry.amount, entry.pay_to) == (amount, DEFAULT_PAY_TO)
    assert int(chain.rpc.call("eth_getTransactionReceipt", [entry.tx_hash])["status"], 16) == 1
    again = await _reconcile_report(settings)
    assert (again.booked_from_chain, len(await ledger_entries(sqlite_url))) == (0, 1)


async def test_a_reversed_booking_whose_transfer_is_on_chain_is_reported(
    sqlite_url: str, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    settings, _, _ = await _paid_and_booked(sqlite_url, start_merchant, new_payer, valid_for_s=120)
    engine = create_engine(sqlite_url)
    try:
        ledger = Ledger(engine, Outbox(engine))
        (entry,) = await ledger.unfinalized_settlements()
        await ledger.reverse_settlement(entry.id, reason="reversed by mistake: the transfer stands")
    finally:
        await engine.dispose()

    report = await _reconcile_any(settings)

    (problem,) = report.unresolved
    assert f"is on chain, but its booking {entry.id} was reversed" in problem, problem
    assert (report.booked_from_chain, len(await ledger_entries(sqlite_url))) == (0, 1)  # nothing rebooked


def _head(chain: DevChain) -> int:
    return int(chain.rpc.call("eth_blockNumber"), 16)


def _span(rpc: RecordingRpc) -> tuple[int, int]:
    """The first and last block the recorded log queries read."""
    queries = [params[0] for params in rpc.made("eth_getLogs")]
    return min(int(q["fromBlock"], 16) for q in queries), max(int(q["toBlock"], 16) for q in queries)


async def test_a_second_pass_reads_only_new_blocks_and_those_a_reorg_may_still_change(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    merchant = start_merchant(sqlite_url)
    merchant.stop()
    # A payment no offer explains: reported by every pass that reads its block.
    submit_directly(chain, sign_payment(new_payer(), make_requirements(chain, pay_to=DEFAULT_PAY_TO)))
    paid_in = _head(chain)
    confirmations, margin, lookback = 2, 3, merchant.settings.reconcile_lookback_blocks
    engine = create_engine(sqlite_url)
    facilitator = Facilitator.from_settings(merchant.settings.facilitator_settings(), engine=engine)
    rpc = RecordingRpc(chain.rpc_url)
    offers, ledger, tasks = OfferStore(engine), Ledger(engine, Outbox(engine)), InMemoryTaskStore()
    reconciler = Reconciler(
        facilitator=facilitator,
        recovery=PaymentRecovery(
            offers=offers, facilitator=facilitator, ledger=ledger, chain=rpc, tasks=tasks
        ),
        offers=offers,
        ledger=ledger,
        rpc=rpc,
        confirmations=confirmations,
        asset=chain.asset,
        chain_id=chain.chain_id,
        pay_tos=[DEFAULT_PAY_TO],
        lookback_blocks=lookback,
        reorg_margin_blocks=margin,
    )
    passes: list[tuple[tuple[int, int], int, int]] = []
    try:
        for _ in range(3):
            rpc.calls.clear()
            report = await reconciler.run_once()
            passes.append((_span(rpc), len(rpc.made("eth_getTransactionReceipt")), len(report.unresolved)))
            chain.rpc.call("anvil_mine", [hex(10)])
    finally:
        await reconciler.aclose()
        await facilitator.aclose()
        await engine.dispose()

    reread = confirmations + margin
    assert passes == [
        ((max(paid_in - lookback + 1, 0), paid_in), 1, 1),  # a new reconciler reads the whole lookback
        ((paid_in - reread + 1, paid_in + 10), 1, 1),  # then from its last block, less the reorg window
        ((paid_in + 10 - reread + 1, paid_in + 20), 0, 0),  # the payment's block is final: not read again
    ]


async def test_only_finalized_bookings_of_this_chain_to_a_watched_payee_are_reported_as_reorged_away(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter
) -> None:
    merchant = start_merchant(sqlite_url)
    merchant.stop()
    other_chain = chain.chain_id + 1
    # Finalized bookings whose transactions this chain never had: the watched payee's (a deep reorg),
    # one on another chain and one to a payTo no tenant has any more (nothing to say about either).
    changes: dict[str, dict[str, object]] = {
        "watched": {},
        "other chain": {"chain_id": other_chain, "network": f"eip155:{other_chain}"},
        "removed payee": {"pay_to": PAY_TO},
    }
    engine = create_engine(sqlite_url)
    try:
        ledger = Ledger(engine, Outbox(engine))
        ids: dict[str, str] = {}
        for name, change in changes.items():
            entry = await ledger.book_settlement(
                booking(
                    **{
                        "pay_to": DEFAULT_PAY_TO,
                        "asset": chain.asset,
                        "network": chain.network,
                        "chain_id": chain.chain_id,
                        "block_number": _head(chain),
                        **change,
                    }
                )
            )
            await ledger.mark_final(entry.id, confirmations=1)
            ids[name] = entry.id
    finally:
        await engine.dispose()

    report = await _reconcile_any(merchant.settings)

    (problem,) = report.unresolved
    assert problem.startswith(f"{ids['watched']}: finalized, but "), problem
