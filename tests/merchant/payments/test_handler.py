"""Requests the payment layer refuses: a clear A2A error, the task unchanged, nothing booked or on chain.

Each refusal is checked on every binding: JSON-RPC (`error.code`, ErrorInfo in `error.data`), HTTP+JSON
(HTTP status, ErrorInfo in `error.details`) and gRPC (status code, ErrorInfo in the `google.rpc.Status`
details), with the same reason and message.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from a2a_x402.merchant.callers import CallerKeys
from a2a_x402.merchant.payments import OfferStore
from a2a_x402.merchant.payments._handler import USED_ELSEWHERE
from a2a_x402.merchant.payments._wire import payload_hash
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S, within_deadline
from tests.fixtures.merchant import (
    DEFAULT_PRICE,
    TWO_TENANTS,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    payment_message,
    user_message,
    write_tenants_file,
)

from .flows import JSON, address_of, assert_nothing_happened, extension, offer, snapshot

# (HTTP status, JSON-RPC code), or (gRPC status, None), of each A2A error per binding; the reason is the
# same on all three.
CODES: dict[str, dict[str, tuple[int | str, int | None]]] = {
    "TASK_NOT_FOUND": {"jsonrpc": (200, -32001), "rest": (404, None), "grpc": ("NOT_FOUND", None)},
    "TASK_NOT_CANCELABLE": {
        "jsonrpc": (200, -32002),
        "rest": (400, None),
        "grpc": ("FAILED_PRECONDITION", None),
    },
    "UNSUPPORTED_OPERATION": {
        "jsonrpc": (200, -32004),
        "rest": (400, None),
        "grpc": ("FAILED_PRECONDITION", None),
    },
    "EXTENSION_SUPPORT_REQUIRED": {
        "jsonrpc": (200, -32008),
        "rest": (400, None),
        "grpc": ("FAILED_PRECONDITION", None),
    },
    "INVALID_PARAMS": {"jsonrpc": (200, -32602), "rest": (400, None), "grpc": ("INVALID_ARGUMENT", None)},
}
NOT_THE_TERMS = "the payment does not match the terms offered for this task"
_SETTLE_WAIT_S = 1.0
"""How long a paid turn waits for its settlement, in the tests of how long an answer waits."""
_LONG_SETTLE_WAIT_S = 30.0
"""A settle timeout no answer that must not wait for the settlement can be mistaken for waiting out."""


def terms_of(task: JSON) -> PaymentRequirements:
    """The one payment option a task offers."""
    [requirements] = offered_terms(task).accepts
    return requirements


async def refused(call: Awaitable[object], wire: MerchantWire, reason: str, message: str) -> None:
    """`call` (an awaitable A2A call) fails with `reason` and exactly `message`, coded for the binding."""
    with pytest.raises(A2ACallError) as failure:
        await call
    assert failure.value.reason == reason
    assert failure.value.message == message
    assert failure.value.coded == CODES[reason][wire.binding]


async def assert_unchanged(wire: MerchantWire, task: JSON) -> None:
    """The task's status is still the one it had."""
    assert (await wire.get_task(task["id"]))["status"] == task["status"]


# -- tasks and contexts -------------------------------------------------------------------------------


async def test_payment_for_an_unknown_task(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(wire)
    before = snapshot(chain, address_of(payer_key))
    unknown = str(uuid.uuid4())

    call = wire.send(payment_message(unknown, sign_payment(payer_key, terms_of(task))))

    await refused(call, wire, "TASK_NOT_FOUND", f"Task {unknown} not found")
    await assert_unchanged(wire, task)
    await assert_nothing_happened(chain, before, address_of(payer_key), merchant.database_url)


async def test_payment_in_another_context(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(wire)
    other = (await offer(wire))["contextId"]
    before = snapshot(chain, address_of(payer_key))
    message = payment_message(task["id"], sign_payment(payer_key, terms_of(task)), context_id=other)

    call = wire.send(message)

    expected = f"Context {other} does not match context {task['contextId']} of task {task['id']}"
    await refused(call, wire, "INVALID_PARAMS", expected)
    await assert_unchanged(wire, task)
    await assert_nothing_happened(chain, before, address_of(payer_key), merchant.database_url)


# -- payloads that are not for this task's terms ------------------------------------------------------


async def test_payment_signed_for_another_tasks_terms(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task, other = await offer(wire), await offer(wire)
    before = snapshot(chain, address_of(payer_key))

    call = wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(other))))

    await refused(call, wire, "INVALID_PARAMS", NOT_THE_TERMS)
    await assert_unchanged(wire, task)
    await assert_unchanged(wire, other)
    await assert_nothing_happened(chain, before, address_of(payer_key), merchant.database_url)


@pytest.mark.parametrize("change", ["payTo", "asset", "amount", "network"])
async def test_payment_on_other_terms(
    sqlite_wire: MerchantWire, sqlite_merchant: RunningMerchant, chain: DevChain, payer_key: str, change: str
) -> None:
    """Signed, consistent with itself, but for another payee, token, price or chain than offered."""
    task = await offer(sqlite_wire)
    before = snapshot(chain, address_of(payer_key))
    changed = {
        "payTo": Account.create().address,
        "asset": chain.erc1271_wallet,  # some other contract
        "amount": str(DEFAULT_PRICE - 1),
        "network": "eip155:1",
    }[change]
    other_terms = PaymentRequirements.model_validate({**terms_of(task).to_json_dict(), change: changed})

    call = sqlite_wire.send(payment_message(task["id"], sign_payment(payer_key, other_terms)))

    await refused(call, sqlite_wire, "INVALID_PARAMS", NOT_THE_TERMS)
    await assert_unchanged(sqlite_wire, task)
    await assert_nothing_happened(chain, before, address_of(payer_key), sqlite_merchant.database_url)


async def test_payment_signed_to_another_payee_than_it_claims(
    sqlite_wire: MerchantWire, sqlite_merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    """`accepted` is copied from the offer, but the signed authorization pays someone else."""
    task = await offer(sqlite_wire)
    terms = terms_of(task)
    before = snapshot(chain, address_of(payer_key))
    elsewhere = PaymentRequirements.model_validate(
        {**terms.to_json_dict(), "payTo": Account.create().address}
    )
    signed = sign_payment(payer_key, elsewhere)
    disguised = signed.model_copy(update={"accepted": terms})

    call = sqlite_wire.send(payment_message(task["id"], disguised))

    await refused(call, sqlite_wire, "INVALID_PARAMS", NOT_THE_TERMS)
    await assert_unchanged(sqlite_wire, task)
    await assert_nothing_happened(chain, before, address_of(payer_key), sqlite_merchant.database_url)


# -- replays ------------------------------------------------------------------------------------------


async def test_payment_already_settled_for_an_earlier_task(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    first = await offer(wire)
    payload = sign_payment(payer_key, terms_of(first))
    paid = (await wire.send(payment_message(first["id"], payload)))["task"]
    assert paid["status"]["state"] == "TASK_STATE_COMPLETED", paid["status"]
    task = await offer(wire)
    before = snapshot(chain, address_of(payer_key))
    booked = await ledger_entries(merchant.database_url)

    # As sent for the first task, and with `accepted` (which is not signed) swapped for this task's terms.
    as_sent = wire.send(payment_message(task["id"], payload))
    await refused(as_sent, wire, "INVALID_PARAMS", NOT_THE_TERMS)
    replayed = payload.model_copy(update={"accepted": terms_of(task)})
    await refused(
        wire.send(payment_message(task["id"], replayed)),
        wire,
        "INVALID_PARAMS",
        USED_ELSEWHERE,
    )

    await assert_unchanged(wire, task)
    assert snapshot(chain, address_of(payer_key)) == before
    assert await ledger_entries(merchant.database_url) == booked


async def test_second_payment_for_a_completed_task(
    wire: MerchantWire, merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(wire)
    done = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task)))))["task"]
    before = snapshot(chain, address_of(payer_key))
    booked = await ledger_entries(merchant.database_url)

    call = wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task))))

    expected = f"Task {task['id']} is in terminal state: TASK_STATE_COMPLETED"
    await refused(call, wire, "UNSUPPORTED_OPERATION", expected)
    assert (await wire.get_task(task["id"]))["status"] == done["status"]
    assert snapshot(chain, address_of(payer_key)) == before
    assert len(booked) == 1 and await ledger_entries(merchant.database_url) == booked


# -- the extension itself -----------------------------------------------------------------------------


async def test_priced_skill_without_the_extension(sqlite_merchant: RunningMerchant, binding: str) -> None:
    async with sqlite_merchant.http(extensions=None) as http:
        wire = MerchantWire(http, binding)

        call = wire.send(user_message())

        expected = "this skill is paid: activate the x402 payment extension (A2A-Extensions)"
        await refused(call, wire, "EXTENSION_SUPPORT_REQUIRED", expected)
        assert (await wire.list_tasks())["tasks"] == []


async def test_payment_without_the_extension(
    sqlite_wire: MerchantWire, sqlite_merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(sqlite_wire)
    before = snapshot(chain, address_of(payer_key))
    async with sqlite_merchant.http(extensions=None) as http:
        plain = MerchantWire(http, sqlite_wire.binding)

        call = plain.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task))))

        expected = "the message carries x402 payment data but the extension is not activated"
        await refused(call, plain, "EXTENSION_SUPPORT_REQUIRED", expected)
    await assert_unchanged(sqlite_wire, task)
    await assert_nothing_happened(chain, before, address_of(payer_key), sqlite_merchant.database_url)


MALFORMED: dict[str, tuple[Any, str]] = {
    "no-payload": (
        {"status": "payment-submitted"},
        f"metadata['{EXTENSION_URI}'].payload: required with status payment-submitted",
    ),
    "unknown-status": (
        {"status": "payment-sent"},
        f"metadata['{EXTENSION_URI}'].status",
    ),
    "not-an-object": ("payment-submitted", f"metadata['{EXTENSION_URI}']"),
    "bad-payload": (
        {"status": "payment-submitted", "payload": {"x402Version": 2, "payload": {}}},
        f"metadata['{EXTENSION_URI}'].payload",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_malformed_extension_metadata(
    sqlite_wire: MerchantWire, sqlite_merchant: RunningMerchant, case: str
) -> None:
    task = await offer(sqlite_wire)
    value, where = MALFORMED[case]
    message = user_message("paying", task_id=task["id"], metadata={EXTENSION_URI: value})

    with pytest.raises(A2ACallError) as failure:
        await sqlite_wire.send(message)

    assert failure.value.reason == "INVALID_PARAMS"
    assert failure.value.coded == CODES["INVALID_PARAMS"][sqlite_wire.binding]
    assert failure.value.message.startswith(f"malformed x402 extension metadata: {where}")
    await assert_unchanged(sqlite_wire, task)
    assert await ledger_entries(sqlite_merchant.database_url) == []


async def issue_key(database_url: str, name: str) -> str:
    """A new API key of the default tenant named `name`."""
    engine = create_engine(database_url)
    try:
        return await CallerKeys(engine).create("", name)
    finally:
        await engine.dispose()


async def stored_task_count(database_url: str) -> int:
    """How many tasks the merchant stored, whoever owns them."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            return int((await connection.execute(sa.text("SELECT count(*) FROM tasks"))).scalar_one())
    finally:
        await engine.dispose()


async def test_oversized_messages(
    sqlite_wire: MerchantWire, sqlite_merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    big = "x" * (64 * 1024)
    expected = "the message is larger than 65536 bytes"
    await refused(sqlite_wire.send(user_message(big)), sqlite_wire, "INVALID_PARAMS", expected)
    task = await offer(sqlite_wire)
    message = payment_message(task["id"], sign_payment(payer_key, terms_of(task)))
    message["parts"] = [{"text": big}]
    before = snapshot(chain, address_of(payer_key))

    await refused(sqlite_wire.send(message), sqlite_wire, "INVALID_PARAMS", expected)

    await assert_unchanged(sqlite_wire, task)
    # Anonymous callers list nothing without a contextId: count the stored tasks instead.
    assert await stored_task_count(sqlite_merchant.database_url) == 1
    await assert_nothing_happened(chain, before, address_of(payer_key), sqlite_merchant.database_url)


# -- cancel -------------------------------------------------------------------------------------------


async def test_cancel_or_another_message_while_the_payment_is_settled(
    start_merchant: MerchantStarter, database_url: str, binding: str, chain: DevChain, payer_key: str
) -> None:
    merchant = start_merchant(database_url, settle_timeout_s=0.5)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire)
        chain.rpc.call("evm_setAutomine", [False])
        working = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task)))))[
            "task"
        ]
        assert working["status"]["state"] == "TASK_STATE_WORKING"

        expected = "the task's payment is being settled; it can no longer be canceled"
        await refused(wire.cancel(task["id"]), wire, "TASK_NOT_CANCELABLE", expected)
        # Another caller is told nothing of the payment: the task does not exist for it (issue 24).
        stranger_key = await issue_key(merchant.database_url, "stranger")
        async with merchant.http() as stranger_http:
            stranger_http.headers["Authorization"] = f"Bearer {stranger_key}"
            with pytest.raises(A2ACallError) as failure:
                await MerchantWire(stranger_http, binding).cancel(task["id"])
            assert failure.value.reason == "TASK_NOT_FOUND"
        # A plain message would ask for the work again: it must not replace the terms being paid.
        expected = "this task's payment is settling: it takes no other message until it ends"
        plain = user_message("Count these words instead.", task_id=task["id"], context_id=task["contextId"])
        await refused(wire.send(plain), wire, "UNSUPPORTED_OPERATION", expected)

        await assert_unchanged(wire, working)
        chain.rpc.call("evm_mine")
        await _until(wire, task["id"], lambda t: t["status"]["state"] == "TASK_STATE_COMPLETED", "completed")
    [entry] = await ledger_entries(merchant.database_url)
    assert entry.task_id == task["id"]


async def test_cancel_before_paying(
    sqlite_wire: MerchantWire, sqlite_merchant: RunningMerchant, chain: DevChain, payer_key: str
) -> None:
    task = await offer(sqlite_wire)
    before = snapshot(chain, address_of(payer_key))

    canceled = await sqlite_wire.cancel(task["id"])

    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    expected = f"Task {task['id']} is in terminal state: TASK_STATE_CANCELED"
    call = sqlite_wire.send(payment_message(task["id"], sign_payment(payer_key, terms_of(task))))
    await refused(call, sqlite_wire, "UNSUPPORTED_OPERATION", expected)
    await assert_nothing_happened(chain, before, address_of(payer_key), sqlite_merchant.database_url)


# -- a payment presented again (T13) ----------------------------------------------------------------


async def _until(wire: MerchantWire, task_id: str, done: Callable[[JSON], bool], what: str) -> JSON:
    """The stored task once `done(task)`; fails after `HANG_S`."""
    deadline = time.monotonic() + HANG_S
    while not done(task := await wire.get_task(task_id)):
        assert time.monotonic() < deadline, f"the task never {what}: {task['status']}"
        await asyncio.sleep(0.05)
    return task


async def _complete(wire: MerchantWire, chain: DevChain, task_id: str) -> None:
    """Mine the settlement and wait for the task to complete, so nothing is left running.

    The settlement may not be broadcast yet: mining goes back to automatic before the block of what is held.
    """
    chain.rpc.call("evm_setAutomine", [True])
    chain.rpc.call("evm_mine")
    await _until(wire, task_id, lambda t: t["status"]["state"] == "TASK_STATE_COMPLETED", "completed")


async def test_payment_presented_again_with_return_immediately_is_answered_at_once(
    start_merchant: MerchantStarter, database_url: str, binding: str, chain: DevChain, payer_key: str
) -> None:
    """A blocking re-presentation would wait for the settlement (the settle timeout, as nothing is mined);
    `returnImmediately` does not."""
    merchant = start_merchant(database_url, settle_timeout_s=_LONG_SETTLE_WAIT_S)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire)
        payment = sign_payment(payer_key, terms_of(task))
        chain.rpc.call("evm_setAutomine", [False])
        await wire.send(payment_message(task["id"], payment), {"returnImmediately": True})
        # Working with a status message: the request to pay is no longer the task's status.
        verified = await _until(
            wire,
            task["id"],
            lambda t: t["status"]["state"] == "TASK_STATE_WORKING" and "message" in t["status"],
            "reported payment-verified",
        )

        started = time.monotonic()
        again = await wire.send(payment_message(task["id"], payment), {"returnImmediately": True})
        elapsed = time.monotonic() - started

        assert elapsed < _LONG_SETTLE_WAIT_S / 3, f"answered after {elapsed:.1f} s, as if it waited"
        assert again["task"]["status"] == verified["status"], "the task as it stands"
        assert extension(again["task"])["status"] == "payment-verified"
        await _complete(wire, chain, task["id"])


async def test_payment_presented_again_gets_the_history_length_asked_for(
    start_merchant: MerchantStarter, database_url: str, binding: str, chain: DevChain, payer_key: str
) -> None:
    merchant = start_merchant(database_url, settle_timeout_s=0.5)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire)
        payment = sign_payment(payer_key, terms_of(task))
        chain.rpc.call("evm_setAutomine", [False])
        first = (await wire.send(payment_message(task["id"], payment)))["task"]
        assert len(first["history"]) > 1

        again = await wire.send(payment_message(task["id"], payment), {"historyLength": 1})

        assert again["task"]["status"] == first["status"], "the task as it stands, pending receipt included"
        assert [m["messageId"] for m in again["task"]["history"]] == [first["history"][-1]["messageId"]]
        await _complete(wire, chain, task["id"])


async def _taken_by_a_lost_replica(database_url: str, task_id: str, payment: PaymentPayload) -> None:
    """Leave the task's payment as a replica that died right after taking it does: taken, nothing reported."""
    engine = create_engine(database_url)
    try:
        offers = OfferStore(engine)
        offer_ = await offers.get(task_id)
        assert offer_ is not None
        authorization = payment.payload.authorization
        assert await offers.submit(
            task_id,
            round_=offer_.round,
            payer=authorization.from_address,
            nonce=authorization.nonce,
            payload=payment.to_json_dict(),
            payload_hash=payload_hash(payment),
            accepted=payment.accepted.to_json_dict(),
        )
    finally:
        await engine.dispose()


@pytest.mark.parametrize("configuration", [None, {"returnImmediately": True}], ids=["blocking", "immediate"])
async def test_payment_presented_again_after_its_processor_died_is_answered_as_being_processed(
    start_merchant: MerchantStarter,
    database_url: str,
    binding: str,
    chain: DevChain,
    payer_key: str,
    configuration: JSON | None,
) -> None:
    """§11: no status ever reported: the answer, within the wait, is the task working, never terms or 500."""
    merchant = start_merchant(database_url, settle_timeout_s=_SETTLE_WAIT_S)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire)
        payment = sign_payment(payer_key, terms_of(task))
        before = snapshot(chain, address_of(payer_key))
        await _taken_by_a_lost_replica(merchant.database_url, task["id"], payment)

        started = time.monotonic()
        again = (await wire.send(payment_message(task["id"], payment), configuration))["task"]
        elapsed = time.monotonic() - started

        # Bounded by the wait: only an answer that waited for the lost replica reaches this bound.
        assert elapsed < within_deadline(_SETTLE_WAIT_S), f"answered after {elapsed:.1f} s"
        assert again["status"]["state"] == "TASK_STATE_WORKING"
        assert "message" not in again["status"], "never the stored request to pay"
        await assert_unchanged(wire, task)
    await assert_nothing_happened(chain, before, address_of(payer_key), merchant.database_url)


# -- tenants ------------------------------------------------------------------------------------------


async def test_tenant_cannot_pay_or_read_another_tenants_task(
    start_merchant: MerchantStarter,
    database_url: str,
    binding: str,
    chain: DevChain,
    payer_key: str,
    tmp_path: Path,
) -> None:
    merchant = start_merchant(database_url, tenants_file=write_tenants_file(tmp_path / "t.toml", TWO_TENANTS))
    acme_pay_to = TWO_TENANTS["acme"][0]
    payer = address_of(payer_key)
    async with merchant.http() as http:
        acme, globex = MerchantWire(http, binding, "acme"), MerchantWire(http, binding, "globex")
        task = await offer(acme)
        globex_terms = terms_of(await offer(globex))
        before = snapshot(chain, payer, acme_pay_to)
        globex_balance = chain.balance_of(TWO_TENANTS["globex"][0])

        # Exactly what an unknown task id gets: another tenant's task does not exist for globex.
        await refused(globex.get_task(task["id"]), globex, "TASK_NOT_FOUND", "Task not found")
        await refused(globex.cancel(task["id"]), globex, "TASK_NOT_FOUND", "Task not found")
        payment = payment_message(task["id"], sign_payment(payer_key, terms_of(task)))
        await refused(globex.send(payment), globex, "TASK_NOT_FOUND", f"Task {task['id']} not found")
        assert task["id"] not in [t["id"] for t in (await globex.list_tasks())["tasks"]]
        # Paying acme's task on globex's terms (globex's payee and price) is refused by acme.
        other_terms = payment_message(task["id"], sign_payment(payer_key, globex_terms))
        await refused(acme.send(other_terms), acme, "INVALID_PARAMS", NOT_THE_TERMS)

        await assert_unchanged(acme, task)
    await assert_nothing_happened(chain, before, payer, merchant.database_url, acme_pay_to)
    assert chain.balance_of(TWO_TENANTS["globex"][0]) == globex_balance
