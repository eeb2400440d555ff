"""A signed authorization never leaves the merchant (specification §11, issue 24 point 3).

A payment's signature is a bearer instrument until the authorization is settled or expires. No answer
(SendMessage, the stream, SubscribeToTask, GetTask, ListTasks, on every binding and both protocol
versions), no webhook body and no log line, DEBUG included, carries it, nor its first 16 hex digits; the
task's history keeps the payment message with `payload.signature` removed. A refused payment (insufficient
funds, fresh terms) is kept the same way, and the paid one is still settled from the offer row.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.facilitator.wire import PaymentPayload
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.merchant import (
    DEFAULT_PRICE,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    payment_message,
)
from tests.fixtures.wire_v0_3 import BINDINGS_V0_3, WireV0_3, flat_message, message_v0_3, state_of
from tests.merchant.edge.test_paid_versions import v1_payload

from .executors import MidWorkExecutor
from .flows import JSON, offer
from .test_handler import terms_of

_GATE_S = 30.0
"""How long the paid work waits for the test to subscribe (headroom; the test releases it at once)."""


def secrets_of(payload: PaymentPayload | JSON) -> tuple[str, ...]:
    """The payment's signature hex and its first 16 hex digits, as they would appear in any text."""
    signature = (
        payload.payload.signature if isinstance(payload, PaymentPayload) else payload["payload"]["signature"]
    )
    digits = signature.removeprefix("0x").lower()
    return digits, digits[:16]


def assert_absent(secrets: tuple[str, ...], what: str, seen: object) -> None:
    """No secret appears in `seen` (any JSON value or text), in any case."""
    text = (seen if isinstance(seen, str) else json.dumps(seen)).lower()
    for secret in secrets:
        assert secret not in text, f"a payment signature appears in {what}"


def submitted_payload(task: JSON, key: str) -> list[JSON]:
    """The payment payloads of the task's history, as stored (`key`: where the extension keeps it)."""
    found = []
    for message in task.get("history", []):
        metadata = message.get("metadata") or {}
        if key == EXTENSION_URI and metadata.get(EXTENSION_URI, {}).get("status") == "payment-submitted":
            found.append(metadata[EXTENSION_URI]["payload"])
        elif key != EXTENSION_URI and metadata.get("x402.payment.status") == "payment-submitted":
            found.append(metadata["x402.payment.payload"])
    return found


async def outbox_bodies(database_url: str) -> list[str]:
    """Every webhook body the merchant wrote."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(sa.text("SELECT payload FROM webhook_events"))).all()
    finally:
        await engine.dispose()
    return [bytes(row[0]).decode() for row in rows]


def gated_merchant(
    start_merchant: MerchantStarter, database_url: str
) -> tuple[RunningMerchant, Callable[[], None], threading.Event]:
    """A merchant whose paid work waits at a gate: (merchant, open the gate, the work has started)."""
    started, gate = threading.Event(), threading.Event()

    def hook() -> None:
        started.set()
        gate.wait(_GATE_S)

    merchant = start_merchant(database_url, delegate=MidWorkExecutor(hook))
    return merchant, gate.set, started


async def test_no_answer_webhook_or_log_carries_a_signature(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    binding: str,
    chain: DevChain,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    merchant, open_gate, started = gated_merchant(start_merchant, sqlite_url)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire)
        # Unfunded first: refused with fresh terms, its authorization left unused.
        refused = sign_payment(new_payer(DEFAULT_PRICE - 1), terms_of(task))
        again = (await wire.send(payment_message(task["id"], refused)))["task"]
        assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        paid = sign_payment(new_payer(), terms_of(again))
        secrets = secrets_of(refused) + secrets_of(paid)
        answers: list[Any] = [again]

        answers.append(await wire.send(payment_message(task["id"], paid), {"returnImmediately": True}))
        assert await _wait(started)
        # The same payment presented again while it is taken: answered with the task as it stands.
        answers.append(await wire.send(payment_message(task["id"], paid), {"returnImmediately": True}))
        async with wire.subscribe(task["id"]) as events:
            open_gate()
            answers.extend([event async for event in events])
        done = await wire.get_task(task["id"])
        answers += [done, await wire.list_tasks()]
        streamed = await offer(wire)
        answers += await wire.stream(
            payment_message(streamed["id"], sign_payment(new_payer(), terms_of(streamed)))
        )

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    assert len(await ledger_entries(merchant.database_url)) == 2
    # The history keeps both payment messages, without their signatures and otherwise whole.
    stored = submitted_payload(done, EXTENSION_URI)
    assert len(stored) == 2
    for kept, sent in zip(stored, (refused, paid), strict=True):
        assert "signature" not in kept["payload"]
        assert kept["payload"]["authorization"] == sent.to_json_dict()["payload"]["authorization"]
    for number, answer in enumerate(answers):
        assert_absent(secrets, f"answer {number}", answer)
    assert_absent(secrets, "the webhook outbox", await outbox_bodies(merchant.database_url))
    assert_absent(secrets, "the logs", "\n".join(r.getMessage() for r in caplog.records))


@pytest.mark.parametrize("binding_v0_3", BINDINGS_V0_3)
async def test_no_answer_on_a2a_0_3_carries_a_signature(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    binding_v0_3: str,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    merchant = start_merchant(sqlite_url)
    async with WireV0_3.client(merchant.base_url) as http:
        wire = WireV0_3(http, binding_v0_3)
        task = await wire.send(message_v0_3("The quick brown fox."))
        assert state_of(task) == "input-required", task
        terms = task["status"]["message"]["metadata"]["x402.payment.required"]
        refused = v1_payload(new_payer(DEFAULT_PRICE - 1), terms)
        submitted = {"x402.payment.status": "payment-submitted"}
        again = await wire.send(flat_message(task["id"], {**submitted, "x402.payment.payload": refused}))
        assert state_of(again) == "input-required", again
        paid = v1_payload(new_payer(), again["status"]["message"]["metadata"]["x402.payment.required"])
        done = await wire.send(flat_message(task["id"], {**submitted, "x402.payment.payload": paid}))
        read = await wire.get_task(task["id"])

    assert state_of(read) == "completed", read
    secrets = secrets_of(refused) + secrets_of(paid)
    stored = submitted_payload(read, "x402.payment.payload")
    assert len(stored) == 2 and all("signature" not in kept["payload"] for kept in stored)
    for number, answer in enumerate((again, done, read)):
        assert_absent(secrets, f"answer {number}", answer)
    assert_absent(secrets, "the logs", "\n".join(r.getMessage() for r in caplog.records))


async def _wait(event: threading.Event) -> bool:
    """Wait for `event` (set by a worker thread) without blocking the servers' event loop."""
    return await asyncio.to_thread(event.wait, _GATE_S)
