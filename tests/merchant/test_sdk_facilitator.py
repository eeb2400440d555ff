"""The reference merchant with the x402 SDKs' facilitators as its `X402_FACILITATOR_URL`.

Two facilitators nobody here wrote, each served on 127.0.0.1 with the relayer key: the x402 Python SDK's
(`bench/_x402_reference_app.py`, the minimal FastAPI app its example describes, under uvicorn) and the
x402 TypeScript SDK's (`js/ts_facilitator.cjs`: `@x402/core` and `@x402/evm` on node:http, as its example
does it). Neither reports a block number: the merchant reads the receipt itself, so a task paid through
either completes with its artifact and is booked in the paid turn (the ledger row is there when
SendMessage returns), with no ERROR line: by EIP-3009, by Permit2 in the dev chain's plain ERC-20, and
metered by `upto` (settled for the reported usage; nothing used, no transaction). Each refusal is read in
the facilitator's own vocabulary and mapped to the extension's code: an unfunded payer gets fresh terms, a
bad signature and a used nonce fail the task, and none of the facilitator's free text reaches the client.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import Client
from a2a.helpers import new_text_message
from a2a.types import Role, SendMessageRequest, Task, TaskState
from eth_account import Account
from google.protobuf.json_format import MessageToDict

from a2a_x402.devchain import DevChain
from a2a_x402.extension import (
    PaymentCompletedData,
    PaymentFailedData,
    PaymentRequiredData,
    PaymentUsage,
    UsageItem,
)
from a2a_x402.facilitator import HttpFacilitatorClient
from a2a_x402.facilitator.wire import PaymentPayload
from a2a_x402.merchant.checks import check_remote_facilitator
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import claim_rows, relayer_address, submit_directly, tampered
from tests.facilitator.permit2_chain import funded_payer, sdk_sign
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    MerchantStarter,
    MerchantWire,
    activation,
    ledger_entries,
    offered_terms,
    payment_data,
    payment_message,
    sdk_client,
    sdk_payment_message,
)
from tests.fixtures.node import NODE_MODULES
from tests.fixtures.servers import bind_loopback, wait_answering_blocking
from tests.fixtures.subprocesses import unavailable

from .payments.flows import address_of, offer, snapshot, texts
from .payments.test_metered_settlement import MAXIMUM, MeteredExecutor, metered_merchant, pay

_REPO_ROOT = Path(__file__).resolve().parents[2]
_TS_FACILITATOR = Path(__file__).resolve().parent / "js" / "ts_facilitator.cjs"
_TS_PACKAGES = ("@x402/core", "@x402/evm", "viem")
_STARTUP_TIMEOUT_S = 30.0
# What the SDKs' free text (viem's revert dumps, web3's errors) carries and our own sentences never do.
_FREE_TEXT_MARKS = ("Details:", "Contract Call", "revert", "Version: viem", "FiatTokenV2", "ERC20:", "args:")


def _python_sdk_command(port: int, chain: DevChain) -> tuple[list[str], dict[str, str]]:
    env = {
        "PYTHONPATH": str(_REPO_ROOT),
        "BENCH_REF_RPC_URL": chain.rpc_url,
        "BENCH_REF_NETWORK": chain.network,
        "BENCH_REF_PRIVATE_KEY": chain.relayer_key,
    }
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "bench._x402_reference_app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    return command, env


def _typescript_sdk_command(port: int, chain: DevChain) -> tuple[list[str], dict[str, str]]:
    node = shutil.which("node")
    # The checkout's packages first; NODE_PATH (if set) may add a directory holding @x402/*.
    paths = [str(NODE_MODULES), *filter(None, os.environ.get("NODE_PATH", "").split(os.pathsep))]
    found = all(any((Path(p) / name / "package.json").is_file() for p in paths) for name in _TS_PACKAGES)
    if node is None or not found:
        what = "node is not on PATH" if node is None else f"{', '.join(_TS_PACKAGES)} not in {NODE_MODULES}"
        unavailable(f"the TypeScript SDK's facilitator cannot run ({what}): run ./scripts/setup")
    env = {
        "NODE_PATH": os.pathsep.join(paths),
        "TS_FAC_RPC_URL": chain.rpc_url,
        "TS_FAC_NETWORK": chain.network,
        "TS_FAC_PRIVATE_KEY": chain.relayer_key,
        "TS_FAC_PORT": str(port),
    }
    return [node, str(_TS_FACILITATOR)], env


_FACILITATORS = {"python": _python_sdk_command, "typescript": _typescript_sdk_command}


@pytest.fixture(params=sorted(_FACILITATORS))
def sdk_facilitator(request: pytest.FixtureRequest, chain: DevChain, tmp_path: Path) -> Iterator[str]:
    """One x402 SDK's facilitator (Python, TypeScript) on 127.0.0.1; its base URL."""
    with bind_loopback() as sock:
        port = int(sock.getsockname()[1])
    command, env = _FACILITATORS[request.param](port, chain)
    log_path = tmp_path / f"{request.param}-facilitator.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(  # noqa: S603 - a fixed command of this interpreter or node
            command, env={**os.environ, **env}, cwd=_REPO_ROOT, stdout=log, stderr=subprocess.STDOUT
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_answering_blocking(
            base_url + "/supported",
            running=lambda: process.poll() is None,
            what=f"the {request.param} SDK's facilitator",
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
    async with httpx.AsyncClient(timeout=HANG_S) as client:
        yield client


async def _ask(client: Client) -> Task:
    asked = [
        event
        async for event in client.send_message(
            SendMessageRequest(message=new_text_message("Count my words.", role=Role.ROLE_USER)),
            context=activation(),
        )
    ]
    return asked[-1].task


async def _pay(client: Client, task_id: str, payment: PaymentPayload) -> Task:
    paid = [
        event
        async for event in client.send_message(
            SendMessageRequest(message=sdk_payment_message(task_id, payment)),
            context=activation(),
        )
    ]
    return paid[-1].task


def _no_facilitator_text(task: Task) -> None:
    """Every text and receipt the client got is ours: no facilitator message, no revert dump."""
    answer = MessageToDict(task.status.message)
    assert "errorMessage" not in json.dumps(answer)
    [text] = [part["text"] for part in answer["parts"]]
    assert not any(mark in text for mark in _FREE_TEXT_MARKS), text


def _merchant_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.ERROR and record.name.startswith("a2a_x402")
    ]


@pytest.mark.parametrize(
    ("sdk_facilitator", "chain"),
    [
        *(pytest.param(name, "DevUSDC", id=name) for name in sorted(_FACILITATORS)),
        pytest.param("typescript", "FiatTokenV2_2", id="typescript-FiatTokenV2_2"),
    ],
    indirect=True,
)
async def test_a_task_paid_through_the_sdk_facilitator_is_booked_in_the_paid_turn(
    chain: DevChain,
    start_merchant: MerchantStarter,
    sdk_facilitator: str,
    sqlite_url: str,
    http: httpx.AsyncClient,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # No reconciler pass during the test: the booking can only come from the paid turn itself.
    merchant = start_merchant(sqlite_url, facilitator_url=sdk_facilitator, reconcile_interval_s=3600)
    key = new_payer()
    payer = address_of(key)
    client = await sdk_client(http, merchant.base_url, "jsonrpc", streaming=False)
    task = await _ask(client)
    [terms] = offered_terms(task).accepts
    payee_before = chain.balance_of(DEFAULT_PAY_TO)

    with caplog.at_level(logging.WARNING):
        done = await _pay(client, task.id, sign_payment(key, terms))
        entries = await ledger_entries(sqlite_url)
    await client.close()

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [artifact.name for artifact in done.artifacts] == ["text-stats"]
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData)
    [receipt] = completed.receipts
    assert (receipt.success, receipt.payer, receipt.network) == (True, payer, chain.network)
    on_chain = chain.rpc.call("eth_getTransactionReceipt", [receipt.transaction])
    assert int(on_chain["status"], 16) == 1
    # The SDK settled it: no in-process facilitator claimed the authorization in the merchant's database.
    assert await claim_rows(sqlite_url) == []
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + DEFAULT_PRICE
    [entry] = entries
    assert (entry.task_id, entry.tx_hash, entry.amount, entry.payer, entry.block_number) == (
        task.id,
        receipt.transaction,
        DEFAULT_PRICE,
        payer,
        int(on_chain["blockNumber"], 16),
    )
    assert _merchant_errors(caplog) == []


async def test_an_unfunded_payer_gets_fresh_terms_in_our_words(
    chain: DevChain,
    start_merchant: MerchantStarter,
    sdk_facilitator: str,
    sqlite_url: str,
    http: httpx.AsyncClient,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    merchant = start_merchant(sqlite_url, facilitator_url=sdk_facilitator, reconcile_interval_s=3600)
    poor = new_payer(DEFAULT_PRICE - 1)
    client = await sdk_client(http, merchant.base_url, "jsonrpc", streaming=False)
    task = await _ask(client)
    [terms] = offered_terms(task).accepts

    with caplog.at_level(logging.WARNING):
        again = await _pay(client, task.id, sign_payment(poor, terms))
    await client.close()

    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    data = payment_data(again)
    assert isinstance(data, PaymentRequiredData)
    assert data.error is not None and data.error.value == "INSUFFICIENT_FUNDS"
    assert [part.text for part in again.status.message.parts] == [
        "The payment was not taken (INSUFFICIENT_FUNDS); here are fresh terms. "
        f"Payment required: 0.25 USDC to {DEFAULT_PAY_TO}."
    ]
    _no_facilitator_text(again)
    assert chain.balance_of(address_of(poor)) == DEFAULT_PRICE - 1
    assert await ledger_entries(sqlite_url) == []
    # The operator's log keeps the facilitator's reason (and its text, on one line).
    [line] = [r.getMessage() for r in caplog.records if r.name == "a2a_x402.merchant.payments"]
    assert "refused: INSUFFICIENT_FUNDS" in line and "\n" not in line
    assert _merchant_errors(caplog) == []


@pytest.mark.parametrize("fault", ["bad_signature", "used_nonce"])
async def test_a_refused_payment_fails_the_task_with_the_right_code_in_our_words(
    chain: DevChain,
    start_merchant: MerchantStarter,
    sdk_facilitator: str,
    sqlite_url: str,
    http: httpx.AsyncClient,
    new_payer: Callable[..., str],
    fault: str,
) -> None:
    merchant = start_merchant(sqlite_url, facilitator_url=sdk_facilitator, reconcile_interval_s=3600)
    key = new_payer()
    client = await sdk_client(http, merchant.base_url, "jsonrpc", streaming=False)
    task = await _ask(client)
    [terms] = offered_terms(task).accepts
    payment = sign_payment(key, terms)
    if fault == "bad_signature":
        other = sign_payment(Account.create().key.hex(), terms)
        payment = tampered(payment, signature=other.payload.signature)
        expected = (
            "INVALID_SIGNATURE",
            "the authorization's signature is not the payer's; nothing was charged; this task has ended: "
            "send the request again for new terms",
        )
    else:
        submit_directly(chain, payment)  # used on chain before it is presented here
        expected = (
            "DUPLICATE_NONCE",
            "the authorization was already used, not by this merchant for this task; this task has ended: "
            "send the request again for new terms",
        )
    payee_before = chain.balance_of(DEFAULT_PAY_TO)

    failed = await _pay(client, task.id, payment)
    await client.close()

    assert failed.status.state == TaskState.TASK_STATE_FAILED
    data = payment_data(failed)
    assert isinstance(data, PaymentFailedData)
    assert data.error.value == expected[0]
    assert [part.text for part in failed.status.message.parts] == [
        f"Payment verification failed: {expected[1]}"
    ]
    _no_facilitator_text(failed)
    assert list(failed.artifacts) == []
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before
    assert await ledger_entries(sqlite_url) == []


async def test_the_sdk_facilitator_makes_the_merchant_ready_and_passes_check(
    chain: DevChain, start_merchant: MerchantStarter, sdk_facilitator: str, sqlite_url: str
) -> None:
    # The SDK's server has no liveness route: readiness asks what `check` asks, `GET /supported`.
    merchant = start_merchant(sqlite_url, facilitator_url=sdk_facilitator)

    async with httpx.AsyncClient(base_url=merchant.base_url, timeout=HANG_S) as client:
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


async def test_the_sdk_facilitators_supported_names_its_upto_settler(
    chain: DevChain, sdk_facilitator: str
) -> None:
    # The TypeScript SDK lists v1 kinds on networks this package does not know: left out, not a refusal.
    client = HttpFacilitatorClient(sdk_facilitator)
    try:
        supported = await client.supported()
    finally:
        await client.aclose()

    [upto] = [kind for kind in supported.kinds if (kind.x402_version, kind.scheme) == (2, "upto")]
    assert (upto.network, upto.extra) == (chain.network, {"facilitatorAddress": relayer_address(chain)})


async def test_a_permit2_payment_through_the_sdk_facilitator_is_booked_in_the_paid_turn(
    chain: DevChain,
    start_merchant: MerchantStarter,
    sdk_facilitator: str,
    sqlite_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    plain = chain.plain_asset
    merchant = start_merchant(
        sqlite_url, asset=plain, facilitator_url=sdk_facilitator, reconcile_interval_s=3600
    )
    key = funded_payer(chain, plain)
    payer = address_of(key)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire)
        [terms] = offered_terms(task).accepts
        assert terms.extra is not None and terms.extra["assetTransferMethod"] == "permit2"
        before = (chain.balance_of(payer, asset=plain), chain.balance_of(DEFAULT_PAY_TO, asset=plain))
        with caplog.at_level(logging.WARNING):
            done = (await wire.send(payment_message(task["id"], sdk_sign(chain, key, terms))))["task"]
            entries = await ledger_entries(sqlite_url)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", texts(done)
    assert [artifact["name"] for artifact in done["artifacts"]] == ["text-stats"]
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData)
    [receipt] = completed.receipts
    assert (receipt.success, receipt.payer, receipt.network) == (True, payer, chain.network)
    on_chain = chain.rpc.call("eth_getTransactionReceipt", [receipt.transaction])
    assert int(on_chain["status"], 16) == 1
    assert await claim_rows(sqlite_url) == []
    assert (chain.balance_of(payer, asset=plain), chain.balance_of(DEFAULT_PAY_TO, asset=plain)) == (
        before[0] - DEFAULT_PRICE,
        before[1] + DEFAULT_PRICE,
    )
    [entry] = entries
    assert (entry.task_id, entry.asset, entry.amount, entry.tx_hash, entry.block_number) == (
        task["id"],
        plain,
        DEFAULT_PRICE,
        receipt.transaction,
        int(on_chain["blockNumber"], 16),
    )
    assert _merchant_errors(caplog) == []


@pytest.mark.parametrize("quantity", [7, 0], ids=["used", "nothing-used"])
async def test_a_metered_task_through_the_sdk_facilitator_settles_exactly_its_usage(
    chain: DevChain,
    start_merchant: MerchantStarter,
    sdk_facilitator: str,
    sqlite_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    quantity: int,
) -> None:
    used = quantity * 25
    executor = MeteredExecutor([("tokens", quantity, 25)])
    settings = {"facilitator_url": sdk_facilitator, "reconcile_interval_s": 3600}
    merchant = metered_merchant(start_merchant, sqlite_url, tmp_path, executor, **settings)
    payee_before = chain.balance_of(DEFAULT_PAY_TO)
    relayer_before = snapshot(chain, DEFAULT_PAY_TO).relayer_nonce

    with caplog.at_level(logging.WARNING):
        payer, task, done = await pay(chain, merchant)
        entries = await ledger_entries(sqlite_url)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", texts(done)
    assert [artifact["name"] for artifact in done["artifacts"]] == ["text-stats"]
    # The SDK's facilitator settled from the address the merchant's terms named, copied from its /supported.
    [terms] = offered_terms(task).accepts
    assert terms.extra is not None and terms.extra["facilitatorAddress"] == relayer_address(chain)
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData)
    assert completed.usage == PaymentUsage(MAXIMUM, used, (UsageItem("tokens", quantity, 25, used),))
    receipt = completed.receipts[-1]
    assert (receipt.success, receipt.payer, getattr(receipt, "amount", None)) == (True, payer, used)
    assert (chain.balance_of(payer), chain.balance_of(DEFAULT_PAY_TO)) == (10**9 - used, payee_before + used)
    assert await claim_rows(sqlite_url) == []
    if quantity == 0:
        assert (receipt.transaction, texts(done)) == ("", ["Nothing was used, so nothing was charged."])
        assert snapshot(chain, DEFAULT_PAY_TO).relayer_nonce == relayer_before  # nothing was sent
        assert entries == []
    else:
        on_chain = chain.rpc.call("eth_getTransactionReceipt", [receipt.transaction])
        assert int(on_chain["status"], 16) == 1
        [entry] = entries
        assert (entry.task_id, entry.amount, entry.payer, entry.tx_hash) == (
            task["id"],
            used,
            payer,
            receipt.transaction,
        )
    assert _merchant_errors(caplog) == []
