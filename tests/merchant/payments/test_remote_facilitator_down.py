"""A remote facilitator (`X402_FACILITATOR_URL`, a real `x402-facilitator serve` process) that stops
answering while a payment is taken.

At verification nothing was settled or sent: the task fails with `payment-failed` and a code (spec §9.1:
the facilitator failed is `SETTLEMENT_FAILED`), as when the in-process facilitator cannot reach the chain;
the merchant logs one WARNING line, no traceback. At settlement the outcome is unknown (the transaction may
have been sent): the task stays working with `payment-verified` (T9) and the recovery settles it once,
with the same idempotency key, when the facilitator is back.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import PaymentRequirements
from a2a_x402.payer import sign_payment
from tests.facilitator.permit2_chain import funded_payer, sdk_sign
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator_processes import FacilitatorProcess, facilitator_processes
from tests.fixtures.merchant import (
    DEFAULT_PRICE,
    MerchantStarter,
    MerchantWire,
    ledger_entries,
    offered_terms,
    payment_message,
)

from .executors import MidWorkExecutor
from .flows import JSON, address_of, assert_nothing_happened, extension, offer, snapshot, texts


def _terms(task: JSON) -> PaymentRequirements:
    [requirements] = offered_terms(task).accepts
    return requirements


def _stop(started: FacilitatorProcess) -> None:
    """SIGKILL the facilitator and wait (blocking) until its port refuses connections."""
    os.kill(started.process.pid, signal.SIGKILL)
    parts = urlsplit(started.url)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection((parts.hostname, parts.port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the facilitator at {started.url} still answers")


async def test_a_facilitator_down_at_verification_fails_the_task_and_charges_nothing(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with facilitator_processes(chain, tmp_path) as processes:
        remote = await processes.serve(sqlite_url)
        merchant = start_merchant(sqlite_url, facilitator_url=remote.url)
        payer_key = chain.new_payer()
        payer = address_of(payer_key)
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            await processes.wait_killed(remote)
            before = snapshot(chain, payer)
            with caplog.at_level(logging.WARNING):
                answered = (
                    await wire.send(payment_message(task["id"], sign_payment(payer_key, _terms(task))))
                )["task"]
            stored = await wire.get_task(task["id"])

    for seen in (answered, stored):
        assert seen["status"]["state"] == "TASK_STATE_FAILED", seen
        data = extension(seen)
        assert (data["status"], data["error"]) == ("payment-failed", "SETTLEMENT_FAILED")
        assert "the facilitator could not be reached" in texts(seen)[0]
        assert "nothing was charged" in texts(seen)[0]
        assert "artifacts" not in seen
    await assert_nothing_happened(chain, before, payer, sqlite_url)
    warnings = [
        r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("a2a_x402.merchant")
    ]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].levelno == logging.WARNING and warnings[0].exc_info is None
    assert "the facilitator could not be reached" in warnings[0].getMessage()


async def test_a_facilitator_down_at_settlement_leaves_the_task_working_until_it_settles_once(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with facilitator_processes(chain, tmp_path) as processes:
        remote = await processes.serve(sqlite_url)
        port = urlsplit(remote.url).port
        assert port is not None
        merchant = start_merchant(
            sqlite_url,
            facilitator_url=remote.url,
            delegate=MidWorkExecutor(lambda: _stop(remote)),
            settle_timeout_s=2.0,
            reconcile_interval_s=1.0,
            reconcile_stale_after_s=2.0,
        )
        payer_key = chain.new_payer()
        payer = address_of(payer_key)
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            before = snapshot(chain, payer)
            with caplog.at_level(logging.WARNING):
                answered = (
                    await wire.send(payment_message(task["id"], sign_payment(payer_key, _terms(task))))
                )["task"]

                assert answered["status"]["state"] == "TASK_STATE_WORKING", answered
                assert extension(answered)["status"] == "payment-verified"
                assert "artifacts" not in answered

                async def reported_unknown() -> bool:
                    seen = await wire.get_task(task["id"])
                    return "facilitator could not be reached" in " ".join(texts(seen))

                await wait_until(reported_unknown, what="the task says the outcome is not known")
                working = await wire.get_task(task["id"])
                assert working["status"]["state"] == "TASK_STATE_WORKING"
                assert extension(working)["status"] == "payment-verified"
                assert await ledger_entries(sqlite_url) == []
            await processes.serve(sqlite_url, X402_PORT=str(port))

            async def completed() -> bool:
                seen = await wire.get_task(task["id"])
                return bool(seen["status"]["state"] == "TASK_STATE_COMPLETED")

            await wait_until(completed, what="the recovery settles the task")
            done = await wire.get_task(task["id"])

    assert extension(done)["status"] == "payment-completed"
    assert [e.task_id for e in await ledger_entries(sqlite_url)] == [task["id"]]
    after = snapshot(chain, payer)
    assert before.payer - after.payer == DEFAULT_PRICE
    assert after.pay_to - before.pay_to == DEFAULT_PRICE
    assert after.relayer_nonce == before.relayer_nonce + 1  # settled once
    tracebacks = [
        r for r in caplog.records if r.exc_info is not None and r.name.startswith("a2a_x402.merchant")
    ]
    assert tracebacks == [], [r.getMessage() for r in tracebacks]


async def test_a_permit2_payment_interrupted_at_settlement_is_settled_once_by_the_recovery(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
) -> None:
    """As above for `exact` by Permit2: the recovery reads the stored Permit2 payment back, settles it
    through the remote facilitator's HTTP API and books it from the proxy call's permit."""
    plain = chain.plain_asset
    async with facilitator_processes(chain, tmp_path) as processes:
        remote = await processes.serve(sqlite_url)
        port = urlsplit(remote.url).port
        assert port is not None
        merchant = start_merchant(
            sqlite_url,
            asset=plain,
            facilitator_url=remote.url,
            delegate=MidWorkExecutor(lambda: _stop(remote)),
            settle_timeout_s=2.0,
            reconcile_interval_s=1.0,
            reconcile_stale_after_s=2.0,
        )
        payer_key = funded_payer(chain, plain)
        payer = address_of(payer_key)
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            before = chain.balance_of(payer, asset=plain)
            payment = sdk_sign(chain, payer_key, _terms(task))
            answered = (await wire.send(payment_message(task["id"], payment)))["task"]
            assert answered["status"]["state"] == "TASK_STATE_WORKING", answered
            await processes.serve(sqlite_url, X402_PORT=str(port))

            async def completed() -> bool:
                seen = await wire.get_task(task["id"])
                return bool(seen["status"]["state"] == "TASK_STATE_COMPLETED")

            await wait_until(completed, what="the recovery settles the task")
            done = await wire.get_task(task["id"])

    assert extension(done)["status"] == "payment-completed"
    [entry] = await ledger_entries(sqlite_url)
    assert (entry.task_id, entry.asset, entry.amount) == (task["id"], plain, DEFAULT_PRICE)
    assert chain.balance_of(payer, asset=plain) == before - DEFAULT_PRICE
