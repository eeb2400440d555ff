"""A row the reconciler cannot finish never stops its pass (issue 25): two paid turns are left settling by a
stopped merchant, one of them poisoned in the database; the pass finishes and finalizes the other, logs the
poisoned one in one line, counts it (`failed`, the failures metric), and a later pass finishes it once it
can be read again. A poisoned claim of the in-process facilitator is counted the same way (stage `claims`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator
from a2a_x402.merchant._metrics import MerchantMetrics
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.payments import OfferStore
from a2a_x402.merchant.reconciler import ReconcileReport
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.merchant.wiring import build_reconciler
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.payments import POISON, insert_claims, left_behind
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    MerchantStarter,
    MerchantWire,
    chain_settings,
    ledger_entries,
    offered_terms,
    payment_message,
    user_message,
)
from tests.merchant.test_reconciler import _reconcile_any


async def _sql(database_url: str, statement: str, **params: object) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.exec_driver_sql(statement, params)
    finally:
        await engine.dispose()


async def test_a_poisoned_row_is_counted_and_retried_while_the_pass_finishes_the_others(
    sqlite_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    merchant = start_merchant(sqlite_url, settle_timeout_s=0.5, reconcile_stale_after_s=0.1)
    tasks = []
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        payers = [new_payer(), new_payer()]  # minted while blocks are still mined
        chain.rpc.call("evm_setAutomine", [False])
        for payer in payers:
            task = (await wire.send(user_message()))["task"]
            payload = sign_payment(payer, offered_terms(task).accepts[0])
            working = (await wire.send(payment_message(task["id"], payload)))["task"]
            assert working["status"]["state"] == "TASK_STATE_WORKING"
            tasks.append(task["id"])
    merchant.stop()
    chain.rpc.call("evm_mine")
    poisoned, honest = tasks
    engine = create_engine(sqlite_url)
    try:
        offer = await OfferStore(engine).get(poisoned)
    finally:
        await engine.dispose()
    assert offer is not None and offer.payload is not None
    original = orjson.dumps(offer.payload).decode()
    # SQLite keeps JSON as text: the poisoned offer's payment is no x402 payload any more.
    await _sql(
        sqlite_url,
        'UPDATE payment_offers SET payload = \'{"x402Version": "poison"}\' WHERE task_id = :task',
        task=poisoned,
    )

    with caplog.at_level(logging.WARNING, logger="a2a_x402.merchant"):
        report = await _reconcile_any(merchant.settings)

    assert (report.turns_finished, report.finalized, report.failed) == (1, 1, {"turns": 1})
    assert [entry.task_id for entry in await ledger_entries(sqlite_url)] == [honest]
    lines = [r for r in caplog.records if poisoned in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None and "\n" not in lines[0].getMessage()
    registry = CollectorRegistry()
    MerchantMetrics(registry).reconciled(report)
    assert registry.get_sample_value("x402_merchant_reconciler_failures_total", {"stage": "turns"}) == 1

    # Once the row can be read again, the next pass finishes it.
    await _sql(
        sqlite_url,
        "UPDATE payment_offers SET payload = :payload WHERE task_id = :task",
        payload=original,
        task=poisoned,
    )
    retried = await _reconcile_any(merchant.settings)
    assert (retried.turns_finished, retried.failed) == (1, {})
    assert sorted(entry.task_id for entry in await ledger_entries(sqlite_url)) == sorted(tasks)


async def test_a_pass_running_at_shutdown_is_stopped_and_the_loop_ends_promptly(
    sqlite_url: str, chain: DevChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pass that takes long for real (a settlement the chain never shows is waited for 5 s, item after item)
    # used to hold a server's shutdown until it ended; here the pass never ends by itself.
    values: dict[str, Any] = {
        "database_url": sqlite_url,
        **chain_settings(chain),
        "pay_to": DEFAULT_PAY_TO,
        "price": DEFAULT_PRICE,
        "_env_file": None,
    }
    settings = MerchantSettings(**values)
    engine = create_engine(sqlite_url)
    facilitator = Facilitator.from_settings(settings.facilitator_settings(), engine=engine)
    reconciler = build_reconciler(
        settings,
        engine=engine,
        facilitator=facilitator,
        offers=OfferStore(engine),
        ledger=Ledger(engine, Outbox(engine)),
    )
    entered, cancelled = asyncio.Event(), asyncio.Event()

    async def endless_pass() -> ReconcileReport:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    monkeypatch.setattr(reconciler, "_pass", endless_pass)
    stop = asyncio.Event()
    try:
        loop = asyncio.create_task(reconciler.run(stop, interval_s=3600))
        await asyncio.wait_for(entered.wait(), 30)
        stop.set()
        await asyncio.wait_for(loop, 30)  # headroom: without the fix it never ends
        assert cancelled.is_set()
        assert reconciler.last_pass_at is None  # the stopped pass counts as no pass
    finally:
        await reconciler.aclose()
        await facilitator.aclose()
        await engine.dispose()


async def test_a_poisoned_claim_of_the_in_process_facilitator_is_counted_and_the_pass_goes_on(
    sqlite_url: str, chain: DevChain, caplog: pytest.LogCaptureFixture
) -> None:
    values: dict[str, Any] = {
        "database_url": sqlite_url,
        **chain_settings(chain),
        "pay_to": DEFAULT_PAY_TO,
        "price": DEFAULT_PRICE,
        "_env_file": None,
    }
    await insert_claims(
        sqlite_url, left_behind(chain, "clm_poisoned", nonce=POISON), left_behind(chain, "clm_orphan")
    )

    with caplog.at_level(logging.WARNING, logger="a2a_x402"):
        report = await _reconcile_any(MerchantSettings(**values))

    assert (report.claims_moved, report.failed) == (1, {"claims": 1})
    assert [r for r in caplog.records if "clm_poisoned" in r.getMessage()]
    registry = CollectorRegistry()
    MerchantMetrics(registry).reconciled(report)
    assert registry.get_sample_value("x402_merchant_reconciler_failures_total", {"stage": "claims"}) == 1
