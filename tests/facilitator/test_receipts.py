"""Receipt waits: bounded by a deadline (answered `settlement_pending` with the hash), finished later by a
retry with the same key or a status call, counted to the configured depth; a reverted receipt is a failure;
a node that stalls past the deadline does not hold the answer back, neither in the receipt wait nor in the
search for someone else's settlement or the reads that decide what a revert means."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ClaimState
from a2a_x402.facilitator._receipts import ReceiptWatcher, next_pause
from a2a_x402.facilitator._rpc import RpcClient
from a2a_x402.facilitator.wire import Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import within_deadline
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.faults import loopback_server, rpc_proxy

from .conftest import OpenFacilitator
from .payments import claim_rows, relayer_address, submit_directly, tx_count

PENDING_TIMEOUT_S = 1.0
_WAITED_OUT_S = within_deadline(PENDING_TIMEOUT_S)
"""What an answer bounded by `PENDING_TIMEOUT_S` stays under however busy the machine: only a wait the
deadline did not cut reaches it."""
_BUDGET_S = 1.5
"""The time budget the stalled-node tests give a settlement."""
_OVER_BUDGET_S = within_deadline(_BUDGET_S)
"""What an answer within `_BUDGET_S` stays under however busy the machine: only a call left to its own
RPC timeout reaches it."""
_STALLED_RPC_TIMEOUT_S = 2 * _OVER_BUDGET_S
"""The timeout of one RPC call in the stalled-node tests: a call left to it would overrun the budget."""


async def test_an_unmined_settlement_is_pending_with_its_hash_until_mined(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(database_url, receipt_timeout_s=PENDING_TIMEOUT_S)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    chain.rpc.call("evm_setAutomine", [False])

    started = time.monotonic()
    pending = await service.settle(payload, requirements, idempotency_key="slow-1")
    elapsed = time.monotonic() - started
    status_before = await service.settlement_status(payload, requirements)
    duplicate = await service.settle(payload, requirements)

    assert PENDING_TIMEOUT_S * 0.9 < elapsed < _WAITED_OUT_S
    assert (pending.success, pending.error_reason) == (False, Reason.SETTLEMENT_PENDING)
    tx_hash = pending.transaction
    assert chain.rpc.call("eth_getTransactionByHash", [tx_hash])["blockNumber"] is None
    assert status_before == pending
    assert (duplicate.error_reason, duplicate.transaction) == (Reason.DUPLICATE_SETTLEMENT, "")
    assert duplicate.extensions == {"originalSettlement": {"state": "broadcast", "transaction": tx_hash}}
    assert [row["state"] for row in await claim_rows(database_url)] == [ClaimState.BROADCAST]

    chain.rpc.call("evm_mine")
    settled = await service.settle(payload, requirements, idempotency_key="slow-1")
    status_after = await service.settlement_status(payload, requirements)

    assert (settled.success, settled.transaction) == (True, tx_hash)
    assert status_after == settled
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert [row["state"] for row in await claim_rows(database_url)] == [ClaimState.SUCCEEDED]


async def test_success_waits_for_the_configured_confirmations(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, confirmations=3, receipt_timeout_s=0.5)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)

    included = await service.settle(payload, requirements, idempotency_key="deep-1")
    mined_in = int(chain.rpc.call("eth_getTransactionReceipt", [included.transaction])["blockNumber"], 16)
    chain.rpc.call("anvil_mine", ["0x1"])
    two_deep = await service.settlement_status(payload, requirements, timeout_s=0.3)
    chain.rpc.call("anvil_mine", ["0x1"])
    three_deep = await service.settle(payload, requirements, idempotency_key="deep-1")

    assert (included.error_reason, two_deep.error_reason if two_deep else None) == (
        Reason.SETTLEMENT_PENDING,
        Reason.SETTLEMENT_PENDING,
    )
    assert (three_deep.success, three_deep.transaction) == (True, included.transaction)
    assert three_deep.extensions == {"settlement": {"blockNumber": mined_in, "confirmations": 3}}
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["block_number"]) == (ClaimState.SUCCEEDED, mined_in)


async def test_a_transaction_reverted_on_chain_is_a_failure_naming_it(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, receipt_timeout_s=0.5)
    requirements = make_requirements(chain)
    valid_before = int(time.time()) + 60
    payload = sign_payment(new_payer(), requirements, valid_before=valid_before)
    payee_before = chain.balance_of(PAY_TO)
    chain.rpc.call("evm_setAutomine", [False])
    pending = await service.settle(payload, requirements, idempotency_key="late-block")

    # The authorization expires while its transaction waits in the pool: the token reverts it.
    chain.rpc.call("evm_setNextBlockTimestamp", [valid_before + 1])
    chain.rpc.call("evm_mine")
    failed = await service.settle(payload, requirements, idempotency_key="late-block")

    assert pending.error_reason == Reason.SETTLEMENT_PENDING
    assert (failed.success, failed.error_reason, failed.transaction) == (
        False,
        Reason.TRANSACTION_FAILED,
        pending.transaction,
    )
    receipt = chain.rpc.call("eth_getTransactionReceipt", [failed.transaction])
    assert int(receipt["status"], 16) == 0
    assert chain.balance_of(PAY_TO) == payee_before
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["error_reason"]) == (ClaimState.FAILED, Reason.TRANSACTION_FAILED)


@asynccontextmanager
async def stallable_proxy(
    node_url: str, *, only: bytes | None = None
) -> AsyncIterator[tuple[str, asyncio.Event]]:
    """A TCP relay to `node_url` on 127.0.0.1; once the event is set it swallows every request unanswered
    (with `only`, every request whose bytes hold it, such as one RPC method's quoted name).

    That is a node that hangs (no error, no closed connection), which only a timeout can end.
    """
    target = urlsplit(node_url)
    stalled = asyncio.Event()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, requests: bool) -> None:
        try:
            while data := await reader.read(65536):
                if requests and stalled.is_set() and (only is None or only in data):
                    continue
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        node_reader, node_writer = await asyncio.open_connection(target.hostname, target.port)
        await asyncio.gather(
            pipe(client_reader, node_writer, requests=True), pipe(node_reader, client_writer, requests=False)
        )

    async with loopback_server(relay) as url:
        yield url, stalled


async def test_a_node_stalling_past_the_deadline_still_gets_a_pending_answer_within_the_budget(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    relayer = relayer_address(chain)
    async with stallable_proxy(chain.rpc_url) as (proxy_url, stalled):
        service = await open_facilitator(sqlite_url, rpc_url=proxy_url, rpc_timeout_s=_STALLED_RPC_TIMEOUT_S)
        chain.rpc.call("evm_setAutomine", [False])
        started = time.monotonic()
        settling = asyncio.create_task(
            service.settle(payload, requirements, idempotency_key="stalled-1", timeout_s=_BUDGET_S)
        )
        while tx_count(chain, relayer, "pending") == tx_count(chain, relayer):
            assert not settling.done(), f"answered before the broadcast: {settling.result()}"
            await asyncio.sleep(0.01)
        # Broadcast: from now on the node answers nothing (receipts, the pool check) till each call times out.
        stalled.set()
        answer = await settling
        elapsed = time.monotonic() - started
        # A retry checks the pool (and verifies) first: each of those waits is cut at the budget as well.
        started = time.monotonic()
        retried = await service.settle(
            payload, requirements, idempotency_key="stalled-1", timeout_s=_BUDGET_S
        )
        elapsed_retry = time.monotonic() - started
        await service.aclose()

    [in_pool] = chain.rpc.call("eth_getBlockByNumber", ["pending", False])["transactions"]
    for pending in (answer, retried):
        assert (pending.success, pending.error_reason, pending.transaction) == (
            False,
            Reason.SETTLEMENT_PENDING,
            in_pool,
        )
    assert elapsed < _OVER_BUDGET_S
    assert elapsed_retry < _OVER_BUDGET_S
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["tx_hash"]) == (ClaimState.BROADCAST, in_pool)


async def test_the_search_for_a_front_runner_on_a_stalled_node_keeps_to_the_budget(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    presented_at = int(time.time())
    submit_directly(chain, payload)
    async with stallable_proxy(chain.rpc_url, only=b'"eth_getLogs"') as (proxy_url, stalled):
        service = await open_facilitator(sqlite_url, rpc_url=proxy_url, rpc_timeout_s=_STALLED_RPC_TIMEOUT_S)
        stalled.set()  # verification reads the used nonce; the log search then hangs, per call
        started = time.monotonic()
        answer = await service.settle(
            payload,
            requirements,
            idempotency_key="stalled-search",
            timeout_s=_BUDGET_S,
            presented_at=presented_at,
        )
        elapsed = time.monotonic() - started
        await service.aclose()

    # Nothing found in time: the used nonce is refused and nothing recorded, so a later call looks again.
    assert (answer.success, answer.error_reason) == (False, Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED)
    assert elapsed < _OVER_BUDGET_S
    assert await claim_rows(sqlite_url) == []


@pytest.mark.parametrize("stalled_method", ["eth_call", "eth_getBlockByNumber"])
async def test_a_revert_read_on_a_stalled_node_is_pending_within_the_budget_then_decided(
    stalled_method: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    sqlite_url: str,
) -> None:
    """What a revert means is read from the chain: whether the authorization was used (the token's state)
    and can still be (the head block), in one batch; only a used one is then searched for the transfer
    that used it (logs). A node that hangs on either read of the batch is cut."""
    requirements = make_requirements(chain)
    valid_before = int(time.time()) + 60
    payload = sign_payment(new_payer(), requirements, valid_before=valid_before)
    async with stallable_proxy(chain.rpc_url, only=f'"{stalled_method}"'.encode()) as (proxy_url, stalled):
        service = await open_facilitator(sqlite_url, rpc_url=proxy_url, rpc_timeout_s=_STALLED_RPC_TIMEOUT_S)
        chain.rpc.call("evm_setAutomine", [False])
        pending = await service.settle(payload, requirements, idempotency_key="stalled-revert", timeout_s=0.5)
        # The authorization expires while its transaction waits in the pool: the token reverts it.
        chain.rpc.call("evm_setNextBlockTimestamp", [valid_before + 1])
        chain.rpc.call("evm_mine")
        stalled.set()
        started = time.monotonic()
        undecided = await service.settle(
            payload, requirements, idempotency_key="stalled-revert", timeout_s=_BUDGET_S
        )
        elapsed = time.monotonic() - started
        stalled.clear()
        failed = await service.settle(payload, requirements, idempotency_key="stalled-revert", timeout_s=1.0)
        await service.aclose()

    assert pending.error_reason == Reason.SETTLEMENT_PENDING
    assert (undecided.error_reason, undecided.transaction) == (Reason.SETTLEMENT_PENDING, pending.transaction)
    assert elapsed < _OVER_BUDGET_S
    assert (failed.success, failed.error_reason, failed.transaction) == (
        False,
        Reason.TRANSACTION_FAILED,
        pending.transaction,
    )
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["error_reason"]) == (ClaimState.FAILED, Reason.TRANSACTION_FAILED)


def test_a_lone_waiter_is_polled_again_soon_only_where_the_chain_is_polled_every_few_ms() -> None:
    dev_chain_s, block_time_s = 0.003, 1.0
    assert [next_pause([polls], dev_chain_s) for polls in range(5)] == [0.0005] * 3 + [dev_chain_s] * 2
    assert next_pause([0, 0], dev_chain_s) == dev_chain_s
    assert next_pause([0], 0.0002) == 0.0002
    assert next_pause([0], block_time_s) == block_time_s


async def test_a_chain_with_block_times_sees_one_receipt_poll_per_interval_even_for_a_lone_waiter(
    chain: DevChain,
) -> None:
    """A metered RPC provider is not asked again sooner than the interval for a lone settlement."""
    interval_s = 1.0
    unknown_hash = "0x" + "ab" * 32
    async with rpc_proxy(chain.rpc_url) as proxy:
        rpc = RpcClient(proxy.url)
        watcher = ReceiptWatcher(rpc, poll_interval_s=interval_s)
        try:
            receipt = await watcher.wait(unknown_hash, confirmations=1, timeout_s=0.4)
        finally:
            await watcher.aclose()
            await rpc.aclose()

    assert receipt is None
    assert sum(b"eth_getTransactionReceipt" in body for body in proxy.requests) == 1
