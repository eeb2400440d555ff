"""The payment layer's state machine, end to end on the reference merchant, read off the wire.

Offer → payment-submitted → verified (WORKING) → work held → settled → COMPLETED with the artifact and the
receipts; and every way that can go wrong: failed work, failed settlement, retryable and final payment
failures, a rejection, a settlement still pending at the deadline.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import cancel_authorization, submit_directly, tampered
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    BINDINGS,
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    payment_message,
    rejection_message,
    user_message,
)

from .executors import FailingExecutor, GivingUpExecutor, MidWorkExecutor
from .flows import JSON, address_of, assert_nothing_happened, extension, offer, snapshot, texts

TEXT = "The quick brown fox. The dog sleeps."
STATS = {
    "words": 7,
    "sentences": 2,
    "characters": 36,
    "topWords": [
        {"word": "the", "count": 2},
        {"word": "quick", "count": 1},
        {"word": "brown", "count": 1},
        {"word": "fox", "count": 1},
        {"word": "dog", "count": 1},
    ],
}


def terms_of(task: JSON) -> PaymentRequirements:
    """The one payment option a task offers."""
    [requirements] = offered_terms(task).accepts
    return requirements


def assert_text_stats(artifacts: list[JSON]) -> None:
    """`artifacts` is exactly the text-stats product for TEXT."""
    [artifact] = artifacts
    assert artifact["name"] == "text-stats"
    assert artifact["parts"] == [
        {"data": STATS, "mediaType": "application/json"},
        {"text": "7 words, 2 sentences, 36 characters.", "mediaType": "text/plain"},
    ]


def statuses_in_history(task: JSON) -> list[str]:
    """The extension status of every message in the task's history that carries one."""
    return [
        message["metadata"][EXTENSION_URI]["status"]
        for message in task.get("history", [])
        if EXTENSION_URI in message.get("metadata", {})
    ]


# -- the happy path -----------------------------------------------------------------------------------


async def test_priced_request_asks_for_payment_with_x402_v2_terms(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain
) -> None:
    response = await wire.send(user_message(TEXT))

    assert list(response) == ["task"]
    task = response["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["status"]["message"]["role"] == "ROLE_AGENT"
    assert task["status"]["message"]["extensions"] == [EXTENSION_URI]
    assert texts(task) == [f"Payment required: 0.25 USDC to {DEFAULT_PAY_TO}."]
    data = extension(task)
    assert set(data) == {"status", "required"} and data["status"] == "payment-required"
    required = data["required"]
    # Integers stay integers on the wire (a Struct would turn them into 2.0); money is a decimal string.
    assert type(required["x402Version"]) is int and required["x402Version"] == 2
    # v2 terms get none of the fields only x402 v1 clients need (`error`, `resource.mimeType`).
    assert set(required) == {"x402Version", "resource", "accepts"}
    [accepted] = required["accepts"]
    assert type(accepted["maxTimeoutSeconds"]) is int
    extra = accepted["extra"]
    assert {key: value for key, value in accepted.items() if key != "extra"} == {
        "scheme": "exact",
        "network": chain.network,
        "asset": chain.asset,
        "amount": str(DEFAULT_PRICE),
        "payTo": DEFAULT_PAY_TO,
        "maxTimeoutSeconds": 300,
    }
    # The token's EIP-712 domain, and the id that makes these terms this offer's own.
    assert extra == {"name": chain.asset_name, "version": chain.asset_version, "offerId": extra["offerId"]}
    assert re.fullmatch("[0-9a-f]{32}", extra["offerId"])
    assert extra != terms_of(await offer(wire)).extra
    assert required["resource"] == {
        "url": f"{merchant.base_url}/skills/text-stats",
        "description": "text-stats for 0.25 USDC",
    }
    assert (await wire.get_task(task["id"]))["status"] == task["status"]


@pytest.mark.parametrize(
    ("database_url", "binding", "chain"),
    [
        *(
            pytest.param(database, binding, "DevUSDC", id=f"{database}-{binding}", marks=marks)
            for database, marks in (("sqlite", ()), ("postgres", pytest.mark.postgres))
            for binding in BINDINGS
        ),
        pytest.param("sqlite", "jsonrpc", "FiatTokenV2_2", id="sqlite-jsonrpc-FiatTokenV2_2"),
    ],
    indirect=True,
)
async def test_payment_verifies_settles_and_delivers(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(wire, TEXT)
    payer = address_of(payer_key)
    before = snapshot(chain, payer)
    payload = sign_payment(payer_key, terms_of(task))

    response = await wire.send(payment_message(task["id"], payload))

    done = response["task"]
    assert (done["id"], done["contextId"]) == (task["id"], task["contextId"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert_text_stats(done["artifacts"])
    data = extension(done)
    assert data["status"] == "payment-completed" and set(data) == {"status", "receipts"}
    [receipt] = data["receipts"]
    tx_hash = receipt["transaction"]
    on_chain = chain.rpc.call("eth_getTransactionReceipt", [tx_hash])
    block = int(on_chain["blockNumber"], 16)
    assert int(on_chain["status"], 16) == 1
    assert receipt == {
        "success": True,
        "payer": payer,
        "transaction": tx_hash,
        "network": chain.network,
        "amount": str(DEFAULT_PRICE),
        "extensions": {"settlement": {"blockNumber": block, "confirmations": 1}},
    }
    assert texts(done) == [f"Payment settled in transaction {tx_hash}."]
    # The verified stage happened before the completion: its status message is in the history.
    assert statuses_in_history(done) == ["payment-required", "payment-submitted", "payment-verified"]
    assert (await wire.get_task(task["id"]))["status"] == done["status"]
    after = snapshot(chain, payer)
    assert (after.payer, after.pay_to) == (before.payer - DEFAULT_PRICE, before.pay_to + DEFAULT_PRICE)
    [entry] = await ledger_entries(merchant.database_url)
    assert (entry.tenant, entry.task_id, entry.context_id) == ("", task["id"], task["contextId"])
    assert (entry.payer, entry.pay_to, entry.asset, entry.network) == (
        payer,
        DEFAULT_PAY_TO,
        chain.asset,
        chain.network,
    )
    assert (entry.amount, entry.tx_hash, entry.block_number) == (DEFAULT_PRICE, tx_hash, block)
    assert type(entry.amount) is int
    assert entry.lines == (("credit", DEFAULT_PRICE, "revenue"), ("debit", DEFAULT_PRICE, "payer"))


async def test_stream_shows_every_stage(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    asked = await wire.stream(user_message(TEXT))
    assert [next(iter(event)) for event in asked] == ["task", "statusUpdate"]
    task = asked[0]["task"]
    required = asked[1]["statusUpdate"]
    assert required["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert extension(required)["status"] == "payment-required"

    events = await wire.stream(payment_message(task["id"], sign_payment(payer_key, terms_of(required))))

    # The stream closed after the last event: `stream` returns only then.
    assert [next(iter(event)) for event in events] == ["statusUpdate", "artifactUpdate", "statusUpdate"]
    verified, artifact, completed = (next(iter(event.values())) for event in events)
    assert verified["status"]["state"] == "TASK_STATE_WORKING"
    assert extension(verified) == {"status": "payment-verified"}
    assert texts(verified) == ["Payment verified; working."]
    assert artifact["lastChunk"] is True
    assert_text_stats([artifact["artifact"]])
    assert completed["status"]["state"] == "TASK_STATE_COMPLETED"
    assert extension(completed)["status"] == "payment-completed"
    [receipt] = extension(completed)["receipts"]
    assert receipt["success"] is True
    assert all(
        e["taskId"] == task["id"] and e["contextId"] == task["contextId"] for e in (verified, completed)
    )
    [entry] = await ledger_entries(merchant.database_url)
    assert entry.tx_hash == receipt["transaction"]


async def test_x402_version_may_arrive_as_a_float(
    sqlite_wire: MerchantWire, chain: DevChain, payer_key: str
) -> None:
    task = await offer(sqlite_wire, TEXT)
    payload = sign_payment(payer_key, terms_of(task)).to_json_dict()
    payload["x402Version"] = 2.0

    response = await sqlite_wire.send(payment_message(task["id"], payload))

    assert response["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# -- never charge for failed work, never deliver unpaid work ------------------------------------------


@pytest.mark.parametrize(
    "delegate",
    [
        pytest.param(
            FailingExecutor,
            marks=pytest.mark.error_logs("why: the paid skill raises, logged for its operator"),
        ),
        GivingUpExecutor,
    ],
    ids=["raises", "ends-failed"],
)
async def test_failed_work_is_not_charged(
    start_merchant: MerchantStarter,
    database_url: str,
    binding: str,
    chain: DevChain,
    payer_key: str,
    delegate: type[FailingExecutor | GivingUpExecutor],
) -> None:
    merchant = start_merchant(database_url, delegate=delegate())
    payer = address_of(payer_key)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire)
        before = snapshot(chain, payer)
        payload = sign_payment(payer_key, terms_of(task))

        failed = (await wire.send(payment_message(task["id"], payload)))["task"]

        assert failed["status"]["state"] == "TASK_STATE_FAILED"
        assert extension(failed) == {"status": "payment-failed", "error": "SETTLEMENT_FAILED", "receipts": []}
        assert texts(failed) == [
            "The work could not be completed, so the payment was not settled: nothing was charged."
        ]
        assert "artifacts" not in failed
        assert (await wire.get_task(task["id"]))["status"] == failed["status"]
    nonce = bytes.fromhex(payload.payload.authorization.nonce[2:])
    assert not chain.authorization_state(payer, nonce)
    await assert_nothing_happened(chain, before, payer, database_url)


async def test_settlement_refused_for_lack_of_funds_delivers_nothing(
    start_merchant: MerchantStarter, database_url: str, binding: str, chain: DevChain, payer_key: str
) -> None:
    """The payer spends its balance while the work runs: no artifact, fresh terms, paying again works."""
    payer = address_of(payer_key)
    elsewhere = Account.create().address

    drained: list[bool] = []

    def spend_everything_once() -> None:
        if not drained:
            drained.append(True)
            drain = PaymentRequirements.model_validate(
                {**terms_of(task).to_json_dict(), "payTo": elsewhere, "amount": str(chain.balance_of(payer))}
            )
            submit_directly(chain, sign_payment(payer_key, drain))

    merchant = start_merchant(database_url, delegate=MidWorkExecutor(spend_everything_once))
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire, TEXT)
        before = snapshot(chain, payer)

        again = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task)))))[
            "task"
        ]

        assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        data = extension(again)
        assert (data["status"], data["error"]) == ("payment-required", "INSUFFICIENT_FUNDS")
        assert texts(again)[0].startswith(
            "The payment was not taken (INSUFFICIENT_FUNDS); here are fresh terms."
        )
        assert "artifacts" not in again
        assert snapshot(chain, payer).pay_to == before.pay_to
        assert await ledger_entries(merchant.database_url) == []

        chain.mint(payer, DEFAULT_PRICE)
        task = again
        done = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(again)))))[
            "task"
        ]

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert_text_stats(done["artifacts"])
    # The receipts are the task's whole history: the refused settlement, then the successful one.
    refused, settled = extension(done)["receipts"]
    assert (refused["success"], refused["errorReason"]) == (False, "invalid_exact_evm_insufficient_balance")
    assert settled["success"] is True
    assert snapshot(chain, payer).pay_to == before.pay_to + DEFAULT_PRICE
    assert [e.task_id for e in await ledger_entries(merchant.database_url)] == [task["id"]]


async def paid_with_mid_work(
    start_merchant: MerchantStarter,
    database_url: str,
    binding: str,
    payer_key: str,
    mid_work: Callable[[PaymentPayload], None],
    **settings: Any,
) -> tuple[RunningMerchant, JSON, JSON]:
    """Pay for TEXT on a new merchant (`settings` applied) whose work first runs `mid_work(the payment)`;
    (merchant, the offered task, the task the payment's answer holds)."""
    payloads: list[PaymentPayload] = []  # the payment is signed after the merchant (and its executor) start
    merchant = start_merchant(
        database_url, delegate=MidWorkExecutor(lambda: mid_work(payloads[0])), **settings
    )
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire, TEXT)
        payloads.append(sign_payment(payer_key, terms_of(task)))
        answer = (await wire.send(payment_message(task["id"], payloads[0])))["task"]
    return merchant, task, answer


async def test_settlement_front_run_by_someone_else_still_delivers_where_foreign_settlements_count(
    start_merchant: MerchantStarter, sqlite_url: str, binding: str, chain: DevChain, payer_key: str
) -> None:
    """Someone else submits the very authorization while the work runs: the payee was paid, once; the
    operator declared this deployment's database the only one paying to its payTo."""
    before = snapshot(chain, address_of(payer_key))

    merchant, task, done = await paid_with_mid_work(
        start_merchant,
        sqlite_url,
        binding,
        payer_key,
        lambda payload: submit_directly(chain, payload),
        count_foreign_settlements=True,
    )

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert_text_stats(done["artifacts"])
    [receipt] = extension(done)["receipts"]
    assert receipt["success"] is True
    # The settlement named is the front-runner's transaction: the facilitator sent none of its own.
    on_chain = chain.rpc.call("eth_getTransactionReceipt", [receipt["transaction"]])
    assert on_chain["from"] == Account.from_key(chain.deployer_key).address.lower()
    assert snapshot(chain, address_of(payer_key)).pay_to == before.pay_to + DEFAULT_PRICE
    [entry] = await ledger_entries(merchant.database_url)
    assert (entry.task_id, entry.tx_hash) == (task["id"], receipt["transaction"])


async def test_settlement_front_run_by_someone_else_fails_and_books_nothing_by_default(
    start_merchant: MerchantStarter, sqlite_url: str, binding: str, chain: DevChain, payer_key: str
) -> None:
    """The same front-run with the default rule: the transaction may be another deployment's settlement of
    this authorization, so it is not this task's; the payer is told so, nothing is delivered or booked."""
    before = snapshot(chain, address_of(payer_key))

    merchant, _, failed = await paid_with_mid_work(
        start_merchant, sqlite_url, binding, payer_key, lambda payload: submit_directly(chain, payload)
    )

    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    data = extension(failed)
    assert (data["status"], data["error"]) == ("payment-failed", "DUPLICATE_NONCE")
    [receipt] = data["receipts"]
    assert (receipt["success"], receipt["errorReason"]) == (False, "invalid_exact_evm_nonce_already_used")
    # In the merchant's words: the money moved (not for this task), so it never says nothing was charged.
    assert "already used, not by this merchant for this task" in texts(failed)[0]
    assert "nothing was charged" not in texts(failed)[0]
    assert "artifacts" not in failed
    assert snapshot(chain, address_of(payer_key)).pay_to == before.pay_to + DEFAULT_PRICE  # paid, once
    assert await ledger_entries(merchant.database_url) == []


async def test_a_replayed_settled_authorization_is_refused_and_nothing_is_delivered(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    """An authorization that already paid this payee elsewhere, copied from the chain for a new task."""
    task = await offer(wire, TEXT)
    payment = sign_payment(payer_key, terms_of(task))
    submit_directly(chain, payment)  # mined before it is presented here
    payer = address_of(payer_key)
    before = snapshot(chain, payer)

    failed = (await wire.send(payment_message(task["id"], payment)))["task"]

    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    data = extension(failed)
    assert (data["status"], data["error"]) == ("payment-failed", "DUPLICATE_NONCE")
    assert "artifacts" not in failed
    await assert_nothing_happened(chain, before, payer, merchant.database_url)


async def test_settlement_refused_for_good_fails_the_task_without_the_artifact(
    start_merchant: MerchantStarter, sqlite_url: str, binding: str, chain: DevChain, payer_key: str
) -> None:
    """The payer cancels the authorization while the work runs: the merchant's settlement fails for good."""
    merchant, _, failed = await paid_with_mid_work(
        start_merchant,
        sqlite_url,
        binding,
        payer_key,
        lambda payload: cancel_authorization(chain, payer_key, payload.payload.authorization.nonce),
    )

    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    data = extension(failed)
    assert (data["status"], data["error"]) == ("payment-failed", "DUPLICATE_NONCE")
    [receipt] = data["receipts"]
    assert (receipt["success"], receipt["errorReason"]) == (False, "invalid_exact_evm_nonce_already_used")
    assert texts(failed)[0].startswith("Settlement failed:")
    assert "artifacts" not in failed
    assert await ledger_entries(merchant.database_url) == []


# -- payment failures ---------------------------------------------------------------------------------


async def test_expired_payment_gets_fresh_terms(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(wire, TEXT)
    payer = address_of(payer_key)
    before = snapshot(chain, payer)
    now = int(time.time())
    expired = sign_payment(payer_key, terms_of(task), valid_after=now - 600, valid_before=now - 300)

    again = (await wire.send(payment_message(task["id"], expired)))["task"]

    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    data = extension(again)
    assert set(data) == {"status", "required", "error"}
    assert (data["status"], data["error"]) == ("payment-required", "EXPIRED_PAYMENT")
    assert texts(again) == [
        "The payment was not taken (EXPIRED_PAYMENT); here are fresh terms. "
        f"Payment required: 0.25 USDC to {DEFAULT_PAY_TO}."
    ]
    await assert_nothing_happened(chain, before, payer, merchant.database_url)

    done = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(again)))))["task"]

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert_text_stats(done["artifacts"])
    assert len(await ledger_entries(merchant.database_url)) == 1


@pytest.mark.parametrize(
    ("chain", "binding"),
    [
        *(pytest.param("DevUSDC", binding, id=binding) for binding in BINDINGS),
        pytest.param("FiatTokenV2_2", "jsonrpc", id="jsonrpc-FiatTokenV2_2"),
    ],
    indirect=True,
)
async def test_insufficient_funds_gets_fresh_terms(
    sqlite_wire: MerchantWire, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    poor_key = new_payer(DEFAULT_PRICE - 1)
    task = await offer(sqlite_wire, TEXT)

    again = (await sqlite_wire.send(payment_message(task["id"], sign_payment(poor_key, terms_of(task)))))[
        "task"
    ]

    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert extension(again)["error"] == "INSUFFICIENT_FUNDS"
    assert extension(again)["status"] == "payment-required"
    assert chain.balance_of(address_of(poor_key)) == DEFAULT_PRICE - 1


async def test_invalid_signature_fails_the_task(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(wire, TEXT)
    payer = address_of(payer_key)
    before = snapshot(chain, payer)
    other = sign_payment(Account.create().key.hex(), terms_of(task))
    forged = tampered(sign_payment(payer_key, terms_of(task)), signature=other.payload.signature)

    failed = (await wire.send(payment_message(task["id"], forged)))["task"]

    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    assert extension(failed) == {"status": "payment-failed", "error": "INVALID_SIGNATURE", "receipts": []}
    [text] = texts(failed)
    assert text.startswith("Payment verification failed:")
    assert "artifacts" not in failed
    await assert_nothing_happened(chain, before, payer, merchant.database_url)
    with pytest.raises(A2ACallError) as refused:
        await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task))))
    assert refused.value.reason == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize("refusal", ["payer blacklisted", "token paused"])
async def test_a_token_refusal_fails_the_task_naming_it_and_charges_nothing(
    refusal: str, wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(wire, TEXT)
    payer = address_of(payer_key)
    if refusal == "token paused":
        chain.set_paused(True)
    else:
        chain.set_blacklisted(payer, True)
    before = snapshot(chain, payer)

    failed = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task)))))["task"]

    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    assert extension(failed) == {"status": "payment-failed", "error": "SETTLEMENT_FAILED", "receipts": []}
    [text] = texts(failed)
    assert text.startswith("Payment verification failed:")
    assert ("paused" if refusal == "token paused" else "blacklisted the payer") in text
    assert "artifacts" not in failed
    await assert_nothing_happened(chain, before, payer, merchant.database_url)


async def test_rejecting_the_terms_cancels_the_task(
    sqlite_wire: MerchantWire, sqlite_merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(sqlite_wire, TEXT)

    canceled = (await sqlite_wire.send(rejection_message(task["id"])))["task"]

    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert extension(canceled) == {"status": "payment-rejected"}
    assert (await sqlite_wire.get_task(task["id"]))["status"] == canceled["status"]
    with pytest.raises(A2ACallError) as refused:
        await sqlite_wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task))))
    assert refused.value.reason == "UNSUPPORTED_OPERATION"
    assert await ledger_entries(sqlite_merchant.database_url) == []


# -- a settlement still pending at the deadline -------------------------------------------------------


async def test_pending_settlement_answers_working_then_completes(
    start_merchant: MerchantStarter, database_url: str, binding: str, chain: DevChain, payer_key: str
) -> None:
    merchant = start_merchant(database_url, settle_timeout_s=0.5)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire, TEXT)
        chain.rpc.call("evm_setAutomine", [False])

        working = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task)))))[
            "task"
        ]

        assert working["status"]["state"] == "TASK_STATE_WORKING"
        data = extension(working)
        assert data["status"] == "payment-verified"
        [pending] = data["receipts"]
        assert (pending["success"], pending["errorReason"]) == (False, "settlement_pending")
        tx_hash = pending["transaction"]
        assert chain.rpc.call("eth_getTransactionByHash", [tx_hash])["blockNumber"] is None
        assert texts(working) == [f"Settlement transaction {tx_hash} is waiting for confirmation."]
        assert "artifacts" not in working  # held until the settlement is confirmed
        assert await ledger_entries(merchant.database_url) == []

        async with wire.subscribe(task["id"]) as events:
            first = await anext(events)
            assert first["task"]["status"]["state"] == "TASK_STATE_WORKING"
            chain.rpc.call("evm_mine")
            rest = [event async for event in events]

        assert [next(iter(event)) for event in rest] == ["artifactUpdate", "statusUpdate"]
        completed = rest[-1]["statusUpdate"]
        assert completed["status"]["state"] == "TASK_STATE_COMPLETED"
        [receipt] = extension(completed)["receipts"]
        assert (receipt["success"], receipt["transaction"]) == (True, tx_hash)
        done = await wire.get_task(task["id"])
        assert done["status"] == completed["status"]
        assert_text_stats(done["artifacts"])
    [entry] = await ledger_entries(merchant.database_url)
    assert (entry.task_id, entry.tx_hash) == (task["id"], tx_hash)


async def test_pending_settlement_completes_without_a_watcher(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, payer_key: str
) -> None:
    """Nobody subscribes: the merchant keeps waiting for the settlement on its own and completes the task."""
    merchant = start_merchant(sqlite_url, settle_timeout_s=0.5)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire, TEXT)
        chain.rpc.call("evm_setAutomine", [False])
        working = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task)))))[
            "task"
        ]
        assert working["status"]["state"] == "TASK_STATE_WORKING"

        chain.rpc.call("evm_mine")
        done = await _until_state(wire, task["id"], "TASK_STATE_COMPLETED")

    assert_text_stats(done["artifacts"])
    assert extension(done)["status"] == "payment-completed"
    assert len(await ledger_entries(merchant.database_url)) == 1


async def _until_state(wire: MerchantWire, task_id: str, state: str, timeout_s: float = HANG_S) -> JSON:
    deadline = time.monotonic() + timeout_s
    while True:
        task = await wire.get_task(task_id)
        if task["status"]["state"] == state or time.monotonic() > deadline:
            assert task["status"]["state"] == state, task["status"]
            return task
        await asyncio.sleep(0.05)
