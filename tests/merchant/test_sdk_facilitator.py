"""The reference merchant with the x402 Python SDK's facilitator as its `X402_FACILITATOR_URL`.

The SDK ships a facilitator but no server for it; `bench/_x402_reference_app.py` is the minimal FastAPI app
its example describes, and the test serves it on 127.0.0.1 (under uvicorn, as the benchmark does) with the
relayer key. A task paid through the merchant is verified and settled by the SDK, completes with its
artifact and is booked once, with the SDK's transaction. The SDK's answer carries no block number, so the
paid turn cannot book it at once; the reconciler books it from the chain (its transfer and the offer that
it pays), which the test runs every half second.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from a2a.helpers import new_text_message
from a2a.types import Role, SendMessageRequest, TaskState

from a2a_x402 import PaymentCompletedData
from devchain import DevChain
from merchant.checks import check_remote_facilitator
from payer import sign_payment
from tests.facilitator.payments import claim_rows
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    MerchantStarter,
    activation,
    ledger_entries,
    offered_terms,
    payment_data,
    sdk_client,
    sdk_payment_message,
)
from tests.fixtures.servers import bind_loopback, wait_answering_blocking

from .payments.flows import address_of

_REPO_ROOT = Path(__file__).resolve().parents[2]
_STARTUP_TIMEOUT_S = 30.0
_BOOKING_TIMEOUT_S = 30.0


@pytest.fixture
def sdk_facilitator(chain: DevChain, tmp_path: Path) -> Iterator[str]:
    """The x402 SDK's facilitator (the benchmark's reference app) on 127.0.0.1; its base URL."""
    with bind_loopback() as sock:
        port = int(sock.getsockname()[1])
    env = {
        **os.environ,
        "PYTHONPATH": str(_REPO_ROOT),
        "BENCH_REF_RPC_URL": chain.rpc_url,
        "BENCH_REF_NETWORK": chain.network,
        "BENCH_REF_PRIVATE_KEY": chain.relayer_key,
    }
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "bench._x402_reference_app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    log_path = tmp_path / "sdk-facilitator.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(  # noqa: S603 - a fixed command of this interpreter
            command, env=env, cwd=_REPO_ROOT, stdout=log, stderr=subprocess.STDOUT
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_answering_blocking(
            base_url + "/supported",
            running=lambda: process.poll() is None,
            what="the SDK facilitator",
            log=log_path.read_text,
            timeout_s=_STARTUP_TIMEOUT_S,
        )
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A plain httpx client for the a2a-sdk client."""
    async with httpx.AsyncClient(timeout=60) as client:
        yield client


async def test_a_task_paid_through_the_sdk_facilitator_completes_and_is_booked(
    chain: DevChain,
    start_merchant: MerchantStarter,
    sdk_facilitator: str,
    sqlite_url: str,
    http: httpx.AsyncClient,
    new_payer: Callable[..., str],
) -> None:
    merchant = start_merchant(sqlite_url, facilitator_url=sdk_facilitator, reconcile_interval_s=0.5)
    key = new_payer()
    payer = address_of(key)
    client = await sdk_client(http, merchant.base_url, "jsonrpc", streaming=False)
    asked = [
        event
        async for event in client.send_message(
            SendMessageRequest(message=new_text_message("Count my words.", role=Role.ROLE_USER)),
            context=activation(),
        )
    ]
    task = asked[0].task
    [terms] = offered_terms(task).accepts
    payee_before = chain.balance_of(DEFAULT_PAY_TO)

    paid = [
        event
        async for event in client.send_message(
            SendMessageRequest(message=sdk_payment_message(task.id, sign_payment(key, terms))),
            context=activation(),
        )
    ]
    await client.close()

    done = paid[-1].task
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [artifact.name for artifact in done.artifacts] == ["text-stats"]
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData)
    [receipt] = completed.receipts
    assert (receipt.success, receipt.payer, receipt.network) == (True, payer, chain.network)
    assert int(chain.rpc.call("eth_getTransactionReceipt", [receipt.transaction])["status"], 16) == 1
    # The SDK settled it: no in-process facilitator claimed the authorization in the merchant's database.
    assert await claim_rows(sqlite_url) == []
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + DEFAULT_PRICE
    entries = await ledger_entries(sqlite_url)
    deadline = time.monotonic() + _BOOKING_TIMEOUT_S
    while not entries and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        entries = await ledger_entries(sqlite_url)
    [entry] = entries
    assert (entry.task_id, entry.tx_hash, entry.amount, entry.payer) == (
        task.id,
        receipt.transaction,
        DEFAULT_PRICE,
        payer,
    )


async def test_the_sdk_facilitator_makes_the_merchant_ready_and_passes_check(
    chain: DevChain, start_merchant: MerchantStarter, sdk_facilitator: str, sqlite_url: str
) -> None:
    # The SDK's server has no liveness route: readiness asks what `check` asks, `GET /supported`.
    merchant = start_merchant(sqlite_url, facilitator_url=sdk_facilitator)

    async with httpx.AsyncClient(base_url=merchant.base_url, timeout=30) as client:
        response = await client.get("/readyz")

    assert (response.status_code, response.json()["failing"]) == (200, [])
    assert response.json()["checks"]["facilitator"]["detail"] == (
        f"the facilitator at X402_FACILITATOR_URL settles on {chain.network}"
    )
    passed = await check_remote_facilitator(sdk_facilitator, chain.network)
    assert (passed.ok, passed.detail) == (True, f"{sdk_facilitator} settles on {chain.network}")
    other = await check_remote_facilitator(sdk_facilitator, "eip155:1")
    assert (other.ok, other.fatal, other.detail) == (
        False,
        True,
        f"{sdk_facilitator} does not support exact on eip155:1",
    )
