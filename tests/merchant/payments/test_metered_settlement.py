"""Metered skills on the real stack: an `upto` payment signed by the x402 SDK's own client for the maximum,
verified before the work, settled on the dev chain for what the work reported it used.

The payer approved Permit2 on the dev token once; the work reports its usage on `usage_meter`. The tests
read the chain (the payer's and the payee's balances move by exactly the settled amount), the ledger, the
completed status (`x402.payment.usage` beside the receipts) and the billing events.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part
from eth_account import Account
from x402 import x402ClientSync
from x402.mechanisms.evm import EthAccountSigner
from x402.mechanisms.evm.upto.client import UptoEvmScheme
from x402.schemas import PaymentRequired as SdkPaymentRequired

from a2a_x402.devchain import DevChain
from a2a_x402.extension import (
    EXTENSION_URI_V02,
    PaymentCompletedData,
    PaymentFailedData,
    PaymentUsage,
    UsageItem,
)
from a2a_x402.merchant import UsageError, usage_meter
from a2a_x402.merchant.demo_skill import TextStatsExecutor
from a2a_x402.merchant.payments._handler import USED_ELSEWHERE
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.storage import create_engine
from tests.devchain.permit2_sdk import STRANGER, permit2_payer
from tests.facilitator.permit2_payments import resign
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator_processes import facilitator_processes
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    payment_data,
    payment_message,
)

from .executors import FAILURE_TEXT
from .flows import JSON, V03Client, address_of, extension, offer, snapshot, state_of, texts

MAXIMUM = 500_000
Report = tuple[Any, Any, Any]


class MeteredExecutor(AgentExecutor):
    """The text-stats skill, reporting `reports` (name, quantity, unit price) on its usage meter first;
    the meter's refusals are kept in `refusals`. `give_up`: the work then fails instead. `hook` (blocking,
    so in a worker thread) runs after the reports, while the payment is verified and not yet settled."""

    def __init__(
        self, reports: Sequence[Report], *, give_up: bool = False, hook: Callable[[], None] | None = None
    ) -> None:
        self._reports = reports
        self._give_up = give_up
        self._hook = hook
        self._skill = TextStatsExecutor()
        self.refusals: list[str] = []
        self.runs = 0

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Report the usage, then run the skill (or fail)."""
        self.runs += 1
        meter = usage_meter(context)
        for name, quantity, unit_price in self._reports:
            try:
                meter.add(name, quantity=quantity, unit_price=unit_price)
            except UsageError as refused:
                self.refusals.append(str(refused))
        if self._hook is not None:
            await asyncio.to_thread(self._hook)
        if self._give_up:
            updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
            await updater.failed(updater.new_agent_message([Part(text=FAILURE_TEXT)]))
            return
        await self._skill.execute(context, event_queue)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the skill."""
        await self._skill.cancel(context, event_queue)


def metered_merchant(
    start_merchant: MerchantStarter,
    database_url: str,
    tmp_path: Path,
    delegate: AgentExecutor,
    **settings: Any,
) -> RunningMerchant:
    """The reference merchant whose default tenant meters text-stats up to `MAXIMUM`."""
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\n'
        f"[default.metered_skills]\ntext-stats = {MAXIMUM}\n"
    )
    return start_merchant(database_url, tenants_file=tenants, delegate=delegate, **settings)


def upto_payment(chain: DevChain, key: str, task: JSON | None = None, *, terms: JSON | None = None) -> JSON:
    """The payment the x402 SDK's client signs with `key` for the `upto` terms offered (the task's, or
    `terms` as a v0.2 client reads them)."""
    client = x402ClientSync()
    client.register(chain.network, UptoEvmScheme(EthAccountSigner(Account.from_key(key))))
    client.set_spend_controls(False)  # they know only the real USDC deployments
    offered = terms if terms is not None else offered_terms(task or {}).to_json_dict()
    required = SdkPaymentRequired.model_validate(offered)
    signed: JSON = client.create_payment_payload(required).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return signed


async def pay(chain: DevChain, merchant: RunningMerchant, *, unmined: bool = False) -> tuple[str, JSON, JSON]:
    """Ask for the metered skill and pay its terms from a fresh payer who approved Permit2: (payer, the task
    offered, the task answered). `unmined`: the chain mines nothing from the payment on (automine off)."""
    key = permit2_payer(chain, chain.asset, 10**9)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire)
        [terms] = offered_terms(task).accepts
        assert (terms.scheme, terms.amount) == ("upto", MAXIMUM)
        if unmined:
            chain.rpc.call("evm_setAutomine", [False])
        done = (await wire.send(payment_message(task["id"], upto_payment(chain, key, task))))["task"]
    return address_of(key), task, done


async def events(database_url: str) -> list[JSON]:
    engine = create_engine(database_url)
    try:
        stored = await Outbox(engine).events_since("")
    finally:
        await engine.dispose()
    return [json.loads(event.payload) for event in stored]


async def test_three_reported_items_settle_exactly_their_sum(
    start_merchant: MerchantStarter, database_url: str, chain: DevChain, tmp_path: Path
) -> None:
    reports = [("tokens", 1234, 25), ("tokens", 766, 25), ("pages", 3, 10_000), ("calls", 7, 1)]
    merchant = metered_merchant(start_merchant, database_url, tmp_path, MeteredExecutor(reports))
    before_payee = chain.balance_of(DEFAULT_PAY_TO)

    payer, task, done = await pay(chain, merchant)

    used = 2000 * 25 + 3 * 10_000 + 7
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", texts(done)
    assert [artifact["name"] for artifact in done["artifacts"]] == ["text-stats"]
    assert chain.balance_of(payer) == 10**9 - used
    assert chain.balance_of(DEFAULT_PAY_TO) == before_payee + used
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData)
    assert completed.usage == PaymentUsage(
        MAXIMUM,
        used,
        (
            UsageItem("tokens", 2000, 25, 50_000),
            UsageItem("pages", 3, 10_000, 30_000),
            UsageItem("calls", 7, 1, 7),
        ),
    )
    receipt = completed.receipts[-1]
    assert receipt.success and str(receipt.transaction).startswith("0x")
    assert getattr(receipt, "amount", None) == used
    assert [(entry.task_id, entry.amount, entry.payer) for entry in await ledger_entries(database_url)] == [
        (task["id"], used, payer)
    ]
    [booked] = [e["data"] for e in await events(database_url) if e["type"] == "settlement.completed"]
    assert (booked["amount"], booked["maximum"]) == (str(used), str(MAXIMUM))


async def test_usage_above_the_maximum_settles_the_maximum(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    merchant = metered_merchant(
        start_merchant, sqlite_url, tmp_path, MeteredExecutor([("tokens", 10**6, 25)])
    )
    before_payee = chain.balance_of(DEFAULT_PAY_TO)

    payer, task, done = await pay(chain, merchant)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", texts(done)
    assert chain.balance_of(payer) == 10**9 - MAXIMUM
    assert chain.balance_of(DEFAULT_PAY_TO) == before_payee + MAXIMUM
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData) and completed.usage is not None
    assert (completed.usage.settled, completed.usage.items[0].amount) == (MAXIMUM, 25 * 10**6)
    assert [entry.amount for entry in await ledger_entries(sqlite_url)] == [MAXIMUM]


async def test_nothing_used_completes_with_no_transaction_and_no_booking(
    start_merchant: MerchantStarter, database_url: str, chain: DevChain, tmp_path: Path
) -> None:
    merchant = metered_merchant(start_merchant, database_url, tmp_path, MeteredExecutor([("tokens", 0, 25)]))
    payee_before = chain.balance_of(DEFAULT_PAY_TO)
    relayer_before = snapshot(chain, DEFAULT_PAY_TO).relayer_nonce

    payer, _, done = await pay(chain, merchant)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", texts(done)
    assert texts(done) == ["Nothing was used, so nothing was charged."]
    assert [artifact["name"] for artifact in done["artifacts"]] == ["text-stats"]
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData)
    assert completed.receipts[-1].success and completed.receipts[-1].transaction == ""
    assert completed.usage == PaymentUsage(MAXIMUM, 0, (UsageItem("tokens", 0, 25, 0),))
    assert (chain.balance_of(payer), chain.balance_of(DEFAULT_PAY_TO)) == (10**9, payee_before)
    assert snapshot(chain, DEFAULT_PAY_TO).relayer_nonce == relayer_before  # nothing was sent
    assert await ledger_entries(database_url) == []
    assert [e["type"] for e in await events(database_url) if e["type"].startswith("settlement.")] == []


async def test_failed_work_settles_nothing(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    executor = MeteredExecutor([("tokens", 1000, 25)], give_up=True)
    merchant = metered_merchant(start_merchant, sqlite_url, tmp_path, executor)
    payee_before = chain.balance_of(DEFAULT_PAY_TO)
    relayer_before = snapshot(chain, DEFAULT_PAY_TO).relayer_nonce

    payer, _, done = await pay(chain, merchant)

    assert done["status"]["state"] == "TASK_STATE_FAILED"
    assert isinstance(payment_data(done), PaymentFailedData)
    assert "artifacts" not in done or done["artifacts"] == []
    assert (chain.balance_of(payer), chain.balance_of(DEFAULT_PAY_TO)) == (10**9, payee_before)
    assert snapshot(chain, DEFAULT_PAY_TO).relayer_nonce == relayer_before
    assert await ledger_entries(sqlite_url) == []


async def test_bad_usage_reports_are_refused_clearly_and_charge_nothing(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    reports: list[Report] = [
        ("tokens", -5, 25),
        ("tokens", 2.5, 25),
        ("tokens", 2**256, 1),
        ("tokens", 10, 2**255),
        ("tokens", 12, 25),
    ]
    executor = MeteredExecutor(reports)
    merchant = metered_merchant(start_merchant, sqlite_url, tmp_path, executor)

    payer, _, done = await pay(chain, merchant)

    assert executor.refusals == [
        "usage quantity must not be negative, got -5",
        "usage quantity must be a whole number (an int), got float 2.5",
        "usage quantity must be below 2**256, got 1.16e+77",
        "usage of 'tokens' costs 2**256 atomic units or more",
    ]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", texts(done)
    assert chain.balance_of(payer) == 10**9 - 12 * 25  # only the good report counted
    assert [entry.amount for entry in await ledger_entries(sqlite_url)] == [12 * 25]


async def test_the_reconciler_finishes_an_interrupted_metered_settlement_for_the_same_amount(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    used = 7 * 25
    # Imported here: the reconciler test module's helpers start a facilitator of their own.
    from tests.merchant.test_reconciler import _reconcile

    first = metered_merchant(
        start_merchant,
        sqlite_url,
        tmp_path,
        MeteredExecutor([("tokens", 7, 25)]),
        settle_timeout_s=0.5,
        reconcile_stale_after_s=0.1,
    )
    payee_before = chain.balance_of(DEFAULT_PAY_TO)
    payer, task, working = await pay(chain, first, unmined=True)
    assert working["status"]["state"] == "TASK_STATE_WORKING"
    first.stop()  # the process that owned the settlement is gone; its transaction is still in the pool
    chain.rpc.call("evm_mine")

    assert await _reconcile(first.settings) == (1, 0, 1, 0)

    assert chain.balance_of(payer) == 10**9 - used
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + used
    assert [(e.task_id, e.amount) for e in await ledger_entries(sqlite_url)] == [(task["id"], used)]
    merchant = start_merchant(sqlite_url)
    async with merchant.http() as http:
        done = await MerchantWire(http, "jsonrpc").get_task(task["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData) and completed.usage is not None
    assert completed.usage.settled == used
    [pending] = [e["data"] for e in await events(sqlite_url) if e["type"] == "settlement.pending"]
    assert (pending["amount"], pending["maximum"]) == (str(used), str(MAXIMUM))


async def test_a_settled_upto_payment_replayed_for_another_task_is_refused_and_moves_nothing(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    executor = MeteredExecutor([("tokens", 4, 25)])
    merchant = metered_merchant(start_merchant, sqlite_url, tmp_path, executor)
    key = permit2_payer(chain, chain.asset, 10**9)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        first = await offer(wire)
        payment = upto_payment(chain, key, first)
        paid = (await wire.send(payment_message(first["id"], payment)))["task"]
        assert paid["status"]["state"] == "TASK_STATE_COMPLETED", texts(paid)
        task = await offer(wire)
        before = (chain.balance_of(address_of(key)), chain.balance_of(DEFAULT_PAY_TO))
        # `accepted` is not signed: swapped for this task's terms, the permit pays them exactly.
        replayed = {**payment, "accepted": offered_terms(task).accepts[0].to_json_dict()}
        with pytest.raises(A2ACallError) as refused:
            await wire.send(payment_message(task["id"], replayed))
        assert (await wire.get_task(task["id"]))["status"] == task["status"]

    assert (refused.value.reason, refused.value.message) == ("INVALID_PARAMS", USED_ELSEWHERE)
    assert (chain.balance_of(address_of(key)), chain.balance_of(DEFAULT_PAY_TO)) == before
    assert executor.runs == 1
    assert [entry.amount for entry in await ledger_entries(sqlite_url)] == [100]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            {"permitted.amount": str(MAXIMUM - 1)},
            "the payment does not match the terms offered for this task",
        ),
        ({"witness.to": STRANGER}, "the payment does not match the terms offered for this task"),
        ({"witness.facilitator": STRANGER}, None),
    ],
)
async def test_an_upto_payment_that_is_not_for_the_terms_is_never_settled(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
    change: dict[str, str],
    refusal: str | None,
) -> None:
    executor = MeteredExecutor([("tokens", 4, 25)])
    merchant = metered_merchant(start_merchant, sqlite_url, tmp_path, executor)
    key = permit2_payer(chain, chain.asset, 10**9)
    relayer_before = snapshot(chain, DEFAULT_PAY_TO).relayer_nonce
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire)
        # Signed by the payer itself, for other terms than offered: less than the maximum, another payee, or
        # another facilitator (whose relayer alone could settle it).
        payment = resign(upto_payment(chain, key, task), change, key=key, chain_id=chain.chain_id)
        if refusal is not None:
            with pytest.raises(A2ACallError) as refused:
                await wire.send(payment_message(task["id"], payment))
            assert (refused.value.reason, refused.value.message) == ("INVALID_PARAMS", refusal)
        else:
            answered = (await wire.send(payment_message(task["id"], payment)))["task"]
            # The facilitator refuses to verify it: its relayer is not the one the witness names.
            assert answered["status"]["state"] == "TASK_STATE_FAILED", texts(answered)
            assert (extension(answered)["error"], extension(answered)["receipts"]) == (
                "SETTLEMENT_FAILED",
                [],
            )

    assert executor.runs == 0  # verified before the work: refused, nothing ran
    assert chain.balance_of(address_of(key)) == 10**9
    assert snapshot(chain, DEFAULT_PAY_TO).relayer_nonce == relayer_before
    assert await ledger_entries(sqlite_url) == []


async def test_a_metered_settlement_the_facilitator_never_sent_is_settled_by_recovery_for_the_usage(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    # The remote facilitator dies during the work: nothing is sent at settlement, and recovery settles the
    # payment from scratch once it is back, for the usage stored with the offer (not the maximum signed).
    from .test_remote_facilitator_down import _stop

    used = 9 * 25
    async with facilitator_processes(chain, tmp_path) as processes:
        remote = await processes.serve(sqlite_url)
        port = urlsplit(remote.url).port
        executor = MeteredExecutor([("tokens", 9, 25)], hook=lambda: _stop(remote))
        merchant = metered_merchant(
            start_merchant,
            sqlite_url,
            tmp_path,
            executor,
            facilitator_url=remote.url,
            settle_timeout_s=2.0,
            reconcile_interval_s=1.0,
            reconcile_stale_after_s=2.0,
        )
        relayer_before = snapshot(chain, DEFAULT_PAY_TO).relayer_nonce
        payee_before = chain.balance_of(DEFAULT_PAY_TO)
        payer, task, answered = await pay(chain, merchant)
        assert answered["status"]["state"] == "TASK_STATE_WORKING", texts(answered)
        assert await ledger_entries(sqlite_url) == []
        await processes.serve(sqlite_url, X402_PORT=str(port))
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")

            async def completed() -> bool:
                return bool((await wire.get_task(task["id"]))["status"]["state"] == "TASK_STATE_COMPLETED")

            await wait_until(completed, what="the recovery settles the task")
            done = await wire.get_task(task["id"])

    assert chain.balance_of(payer) == 10**9 - used
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + used
    assert snapshot(chain, DEFAULT_PAY_TO).relayer_nonce == relayer_before + 1  # settled once
    assert [(e.task_id, e.amount) for e in await ledger_entries(sqlite_url)] == [(task["id"], used)]
    completed_data = payment_data(done)
    assert isinstance(completed_data, PaymentCompletedData) and completed_data.usage is not None
    assert (completed_data.usage.settled, completed_data.usage.maximum) == (used, MAXIMUM)
    assert executor.runs == 1


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
async def test_a_v0_2_client_pays_metered_terms_as_x402_v2_and_reads_the_usage(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path, binding: str
) -> None:
    merchant = metered_merchant(start_merchant, sqlite_url, tmp_path, MeteredExecutor([("tokens", 40, 25)]))
    key = permit2_payer(chain, chain.asset, 10**9)
    headers = {"X-A2A-Extensions": EXTENSION_URI_V02}
    async with httpx.AsyncClient(base_url=merchant.base_url, headers=headers, timeout=HANG_S) as http:
        client = V03Client(http, binding)
        task = await client.send("The quick brown fox.")
        terms = task["status"]["message"]["metadata"]["x402.payment.required"]
        assert (terms["x402Version"], terms["accepts"][0]["scheme"]) == (2, "upto")
        submission = {
            "x402.payment.status": "payment-submitted",
            "x402.payment.payload": upto_payment(chain, key, terms=terms),
        }
        done = await client.send("Here is the payment.", task_id=task["id"], metadata=submission)

    assert state_of(done) == "completed", done["status"]
    metadata = done["status"]["message"]["metadata"]
    assert metadata["x402.payment.status"] == "payment-completed"
    [receipt] = metadata["x402.payment.receipts"]
    assert (receipt["success"], receipt["amount"]) == (True, "1000")
    assert metadata["x402.payment.usage"] == {
        "maximum": str(MAXIMUM),
        "settled": "1000",
        "items": [{"name": "tokens", "quantity": "40", "unitPrice": "25", "amount": "1000"}],
    }
    assert chain.balance_of(address_of(key)) == 10**9 - 1000
    assert [entry.amount for entry in await ledger_entries(sqlite_url)] == [1000]
