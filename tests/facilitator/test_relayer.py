"""The relayer's nonces stay gap-free: a refused broadcast charges nothing and leaves no hole, a nonce taken
by someone else is skipped, and concurrent settlements get consecutive nonces, sent as one batch in nonce
order; a send refused in the middle of a batch fails alone and its nonce is filled."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from eth_account import Account
from eth_account.typed_transactions.typed_transaction import TypedTransaction
from hexbytes import HexBytes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.devchain import DevChain, encode_call
from a2a_x402.facilitator import ChainUnavailableError, ClaimState, RpcError
from a2a_x402.facilitator._relayer import BroadcastUncertainError, Relayer, SentTransaction
from a2a_x402.facilitator._rpc import RpcClient
from a2a_x402.facilitator.wire import Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.faults import rpc_proxy

from .conftest import OpenFacilitator
from .payments import claim_rows, eth_balance, relayer_address, relayer_nonce, tx_count


def _nonce_of(chain: DevChain, tx_hash: str) -> int:
    return int(chain.rpc.call("eth_getTransactionByHash", [tx_hash])["nonce"], 16)


def _pool_is_empty(chain: DevChain) -> bool:
    status: dict[str, str] = chain.rpc.call("txpool_status")
    return status == {"pending": "0x0", "queued": "0x0"}


async def test_a_broadcast_refused_for_gas_money_charges_nothing_and_leaves_no_gap(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(database_url)
    requirements = make_requirements(chain)
    first_key, second_key = new_payer(), new_payer()
    refused_payload = sign_payment(first_key, requirements)
    payer = refused_payload.payload.authorization.from_address
    relayer = relayer_address(chain)
    wei = eth_balance(chain, relayer)
    nonce = relayer_nonce(chain)
    payer_before, payee_before = chain.balance_of(payer), chain.balance_of(PAY_TO)

    chain.rpc.call("anvil_setBalance", [relayer, "0x0"])
    refused = await service.settle(refused_payload, requirements, idempotency_key="broke-1")

    assert (refused.success, refused.error_reason, refused.transaction) == (
        False,
        Reason.TRANSACTION_FAILED,
        "",
    )
    assert refused.error_message is not None and "nothing was charged" in refused.error_message
    assert (chain.balance_of(payer), chain.balance_of(PAY_TO)) == (payer_before, payee_before)
    assert (tx_count(chain, relayer, "latest"), tx_count(chain, relayer, "pending")) == (nonce, nonce)
    assert [row["state"] for row in await claim_rows(database_url)] == [ClaimState.RELEASED]

    chain.rpc.call("anvil_setBalance", [relayer, hex(wei)])
    next_one = await service.settle(sign_payment(second_key, requirements), requirements)
    # Retried without the key, which still names the settlement afterwards.
    retried = await service.settle(refused_payload, requirements)
    asked_with_key = await service.settle(refused_payload, requirements, idempotency_key="broke-1")

    assert next_one.success and retried.success
    assert asked_with_key == retried
    assert (_nonce_of(chain, next_one.transaction), _nonce_of(chain, retried.transaction)) == (
        nonce,
        nonce + 1,
    )
    assert chain.balance_of(PAY_TO) == payee_before + 2 * requirements.amount
    assert _pool_is_empty(chain)
    assert {row["state"] for row in await claim_rows(database_url)} == {ClaimState.SUCCEEDED}


async def test_a_nonce_taken_by_someone_else_is_skipped(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    requirements = make_requirements(chain)
    key = new_payer()
    relayer = relayer_address(chain)
    assert (await service.settle(sign_payment(key, requirements), requirements)).success
    # Another process with the same key sent five transactions: the facilitator's next nonce is stale.
    moved_to = relayer_nonce(chain) + 5
    chain.rpc.call("anvil_setNonce", [relayer, hex(moved_to)])

    after_move = await service.settle(sign_payment(key, requirements), requirements)
    next_one = await service.settle(sign_payment(key, requirements), requirements)

    assert after_move.success and next_one.success
    assert (_nonce_of(chain, after_move.transaction), _nonce_of(chain, next_one.transaction)) == (
        moved_to,
        moved_to + 1,
    )
    assert _pool_is_empty(chain)


async def test_an_outside_transaction_from_the_relayer_key_costs_nothing(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    requirements = make_requirements(chain)
    key = new_payer()
    relayer = relayer_address(chain)
    assert (await service.settle(sign_payment(key, requirements), requirements)).success
    # The operator sends a transaction with the same key by hand: the relayer's next nonce is now taken,
    # and the node refuses the next settlement's first send for its nonce.
    outside_nonce = relayer_nonce(chain)
    outside = Account.from_key(chain.relayer_key).sign_transaction(
        {
            "chainId": chain.chain_id,
            "nonce": outside_nonce,
            "to": relayer,
            "value": 0,
            "gas": 21_000,
            "maxFeePerGas": 10**11,
            "maxPriorityFeePerGas": 10**9,
        }
    )
    sent = chain.rpc.call("eth_sendRawTransaction", ["0x" + outside.raw_transaction.hex()])
    # A node may answer the send a moment before its block is in: the count is read once it is mined.
    chain.rpc.wait_for_receipt(sent, timeout_s=HANG_S)
    assert relayer_nonce(chain) == outside_nonce + 1
    payee_before = chain.balance_of(PAY_TO)

    after = await service.settle(sign_payment(key, requirements), requirements)
    next_one = await service.settle(sign_payment(key, requirements), requirements)

    assert after.success and next_one.success
    assert (_nonce_of(chain, after.transaction), _nonce_of(chain, next_one.transaction)) == (
        outside_nonce + 1,
        outside_nonce + 2,
    )
    # Nothing sent twice: exactly the two settlements moved money and the relayer's count.
    assert chain.balance_of(PAY_TO) == payee_before + 2 * requirements.amount
    assert relayer_nonce(chain) == outside_nonce + 3
    assert _pool_is_empty(chain)


async def test_concurrent_settlements_get_consecutive_nonces(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    requirements = make_requirements(chain)
    payloads = [sign_payment(new_payer(), requirements) for _ in range(10)]
    nonce = relayer_nonce(chain)

    answers = await asyncio.gather(*(service.settle(p, requirements) for p in payloads))

    assert all(a.success for a in answers)
    assert sorted(_nonce_of(chain, a.transaction) for a in answers) == list(range(nonce, nonce + 10))
    assert relayer_nonce(chain) == nonce + 10
    assert _pool_is_empty(chain)


@pytest.mark.parametrize("delivered", [True, False], ids=["answer lost", "request lost"])
async def test_a_send_whose_answer_is_lost_is_settled_by_asking_the_node(
    delivered: bool, chain: DevChain
) -> None:
    async with rpc_proxy(chain.rpc_url) as proxy:
        lost = proxy.lose(b"eth_sendRawTransaction", deliver=delivered)
        await _send_twice(proxy.url, delivered, chain)
    assert lost.hits == 1


async def _send_twice(url: str, delivered: bool, chain: DevChain) -> None:
    rpc = RpcClient(url)
    relayer = Relayer(rpc, chain.relayer_key, chain.chain_id)
    nonce = relayer_nonce(chain)
    call = "0x" + encode_call("balanceOf(address)", [PAY_TO]).hex()
    try:
        if delivered:
            assert (await relayer.send(chain.asset, call, 100_000)).nonce == nonce
        else:
            with pytest.raises(ChainUnavailableError):
                await relayer.send(chain.asset, call, 100_000)
        # The next send takes the next free nonce: no gap, no reuse.
        following = await relayer.send(chain.asset, call, 100_000)
    finally:
        await rpc.aclose()

    assert following.nonce == nonce + (1 if delivered else 0)
    # A send returns once the node has the transaction; anvil mines it a moment later.
    chain.rpc.wait_for_receipt(following.tx_hash, timeout_s=HANG_S)
    assert relayer_nonce(chain) == following.nonce + 1
    assert _pool_is_empty(chain)


def _sends_in(body: bytes) -> list[str]:
    """The signed transactions an HTTP request to the node carried, in the order it carried them."""
    calls = orjson.loads(body)
    return [c["params"][0] for c in (calls if isinstance(calls, list) else [calls]) if _is_send(c)]


def _is_send(call: dict[str, Any]) -> bool:
    return bool(call["method"] == "eth_sendRawTransaction")


def _nonce_in(raw: str) -> int:
    return int(TypedTransaction.from_bytes(HexBytes(raw)).as_dict()["nonce"])


async def test_concurrent_settlements_send_as_one_batch_in_nonce_order(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    async with rpc_proxy(chain.rpc_url) as proxy:
        service = await open_facilitator(sqlite_url, rpc_url=proxy.url)
        requirements = make_requirements(chain)
        # The first settle starts the relayer's sender (its nonce and fees known from then on).
        assert (await service.settle(sign_payment(new_payer(), requirements), requirements)).success
        payloads = [sign_payment(new_payer(), requirements) for _ in range(40)]
        nonce = relayer_nonce(chain)
        proxy.requests.clear()

        answers = await asyncio.gather(*(service.settle(p, requirements) for p in payloads))

    assert all(a.success for a in answers), [a for a in answers if not a.success]
    assert sorted(_nonce_of(chain, a.transaction) for a in answers) == list(range(nonce, nonce + 40))
    batches = [[_nonce_in(raw) for raw in sends] for sends in map(_sends_in, proxy.requests) if sends]
    for nonces in batches:
        assert nonces == list(range(nonces[0], nonces[0] + len(nonces)))
    # Settlements verified in the same turns send together: far fewer requests than sends. (Should anvil
    # hold one queued, its revival sends that nonce again on its own: only first sends are counted.)
    first_sent: dict[int, int] = {}
    for request, nonces in enumerate(batches):
        for sent_nonce in nonces:
            first_sent.setdefault(sent_nonce, request)
    assert sorted(first_sent) == list(range(nonce, nonce + 40))
    assert len(set(first_sent.values())) <= 8
    assert relayer_nonce(chain) == nonce + 40
    assert _pool_is_empty(chain)


async def test_a_send_refused_in_the_middle_of_a_batch_fails_alone_and_its_nonce_is_filled(
    chain: DevChain,
) -> None:
    rpc = RpcClient(chain.rpc_url)
    relayer = Relayer(rpc, chain.relayer_key, chain.chain_id)
    fillers: list[SentTransaction] = []
    relayer.on_filler = fillers.append
    call = "0x" + encode_call("balanceOf(address)", [PAY_TO]).hex()
    try:
        first = await relayer.send(chain.asset, call, 100_000)  # nonce and fees known: one round below
        chain.rpc.wait_for_receipt(first.tx_hash, timeout_s=HANG_S)
        nonce = first.nonce + 1
        # Nothing is mined while the batch arrives: this relayer has no revival for a nonce anvil would
        # hold queued, were its predecessor mined as it came in (see `_replacement`).
        chain.rpc.call("evm_setAutomine", [False])
        try:
            # The middle one asks for more gas than a block holds: the node refuses it alone.
            gases = [100_000, 100_000, 10**9, 100_000, 100_000]
            answers = await asyncio.gather(
                *(relayer.send(chain.asset, call, gas) for gas in gases), return_exceptions=True
            )
            following = await relayer.send(chain.asset, call, 100_000)
        finally:
            chain.rpc.call("evm_setAutomine", [True])
            chain.rpc.call("evm_mine", [])
    finally:
        await rpc.aclose()

    sent = [a for a in answers if isinstance(a, SentTransaction)]
    assert isinstance(answers[2], RpcError)
    assert [tx.nonce for tx in sent] == [nonce, nonce + 1, nonce + 3, nonce + 4]
    assert [tx.nonce for tx in fillers] == [nonce + 2]
    assert following.nonce == nonce + 5
    chain.rpc.wait_for_receipt(following.tx_hash, timeout_s=HANG_S)
    filler = chain.rpc.call("eth_getTransactionByHash", [fillers[0].tx_hash])
    assert (filler["to"].lower(), int(filler["value"], 16), filler["input"]) == (
        relayer.address.lower(),
        0,
        "0x",
    )
    for tx in [*sent, *fillers]:
        assert chain.rpc.wait_for_receipt(tx.tx_hash, timeout_s=HANG_S)["status"] == "0x1"
    assert relayer_nonce(chain) == nonce + 6
    assert _pool_is_empty(chain)


async def test_a_send_cut_short_after_reaching_the_node_is_uncertain_never_unsent(chain: DevChain) -> None:
    call = "0x" + encode_call("balanceOf(address)", [PAY_TO]).hex()
    async with rpc_proxy(chain.rpc_url) as proxy:
        rpc = RpcClient(proxy.url)
        relayer = Relayer(rpc, chain.relayer_key, chain.chain_id)
        try:
            await relayer.send(chain.asset, call, 100_000)  # nonce and fees known
            held = proxy.hold(b"eth_sendRawTransaction")
            sending = asyncio.create_task(relayer.send(chain.asset, call, 100_000))
            await held.reached.wait()  # the node has the transaction; its answer is held
            await relayer.aclose()  # a shutdown cuts the round short
            with pytest.raises(BroadcastUncertainError) as uncertain:
                await sending
            held.release.set()
        finally:
            await rpc.aclose()

    # Reported as maybe sent, so its claim waits for it: and it is mined.
    assert chain.rpc.wait_for_receipt(uncertain.value.sent.tx_hash, timeout_s=HANG_S)["status"] == "0x1"


async def test_a_hole_at_the_nodes_next_nonce_is_filled_even_without_sends(chain: DevChain) -> None:
    rpc = RpcClient(chain.rpc_url)
    relayer = Relayer(rpc, chain.relayer_key, chain.chain_id)
    nonce = relayer_nonce(chain)
    # What a filler refused in an earlier round leaves, with the next nonce unknown (a lost answer): a
    # node whose pending count stops at the gap answers the hole itself as the next nonce.
    relayer._holes = [nonce]  # noqa: SLF001 - the state no node can be made to produce on cue
    fillers: list[SentTransaction] = []
    relayer.on_filler = fillers.append
    try:
        await relayer._sending()  # noqa: SLF001 - the sender's loop, run to its end
    finally:
        await rpc.aclose()

    # anvil answers a send a moment before its block is in: wait for it rather than race it.
    [filler] = fillers
    chain.rpc.wait_for_receipt(filler.tx_hash, timeout_s=HANG_S)
    assert relayer_nonce(chain) == nonce + 1
    mined = chain.rpc.call("eth_getBlockByNumber", ["latest", True])["transactions"][-1]
    assert (int(mined["nonce"], 16), int(mined["value"], 16), mined["to"].lower()) == (
        nonce,
        0,
        relayer.address.lower(),
    )


def _pending_is_latest(node_url: str, refuse_sends: list[bool]) -> Starlette:
    """A JSON-RPC front to `node_url` answering as ganache does: its pending transaction count is its
    latest, leaving out the transactions its pool holds. While `refuse_sends` holds True, the next request
    carrying a transaction is refused as of a used nonce (and not passed on), once each."""

    async def forward(request: Request) -> Response:
        body = await request.body()
        calls = orjson.loads(body)
        if b"eth_sendRawTransaction" in body and refuse_sends and refuse_sends.pop():
            error = {"code": -32000, "message": "nonce too low"}
            refused = [{"jsonrpc": "2.0", "id": c["id"], "error": error} for c in calls]
            return Response(orjson.dumps(refused if isinstance(calls, list) else refused[0]))
        for call in calls if isinstance(calls, list) else [calls]:
            if call.get("method") == "eth_getTransactionCount" and call["params"][1] == "pending":
                call["params"][1] = "latest"
        if not clients:
            clients.append(httpx.AsyncClient(timeout=HANG_S))
        answer = await clients[0].post(
            node_url, content=orjson.dumps(calls), headers={"content-type": "application/json"}
        )
        return Response(answer.content, media_type="application/json")

    clients: list[httpx.AsyncClient] = []
    return Starlette(routes=[Route("/", forward, methods=["POST"])])


async def test_a_pending_count_leaving_out_the_pool_never_reuses_the_nonce_of_a_transaction_in_flight(
    chain: DevChain, asgi_server: Callable[..., str]
) -> None:
    refuse_sends: list[bool] = []
    rpc = RpcClient(asgi_server(_pending_is_latest(chain.rpc_url, refuse_sends)))
    relayer = Relayer(rpc, chain.relayer_key, chain.chain_id)
    chain.rpc.call("evm_setAutomine", [False])
    try:
        first = await relayer.send(relayer.address, "0x", 21_000)
        # A refusal makes the relayer ask the node's count again: the node says `first`'s nonce is free.
        refuse_sends.append(True)
        second = await relayer.send(relayer.address, "0x", 21_000)
    finally:
        await relayer.aclose()
        await rpc.aclose()

    assert second.nonce == first.nonce + 1
    chain.rpc.call("evm_mine")
    for sent in (first, second):
        receipt = chain.rpc.call("eth_getTransactionReceipt", [sent.tx_hash])
        assert receipt is not None and int(receipt["status"], 16) == 1, sent


async def test_a_send_the_node_takes_after_its_timeout_is_waited_for_never_reported_unsent(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    """A slow node answers the send too late, answers that it does not hold the transaction, and then takes
    it: a send that timed out may have been taken, so the settle waits for it and answers what the chain
    did, never "could not be submitted; nothing was charged" while the payer is charged."""
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    async with rpc_proxy(chain.rpc_url) as proxy:
        service = await open_facilitator(sqlite_url, rpc_url=proxy.url, rpc_timeout_s=1.0)
        late = proxy.late(b"eth_sendRawTransaction", after=b"eth_getTransactionByHash")
        answer = await service.settle(payload, requirements, idempotency_key="late-1")
        assert late.reached.is_set()
        again = await service.settle(payload, requirements, idempotency_key="late-1")

    assert (answer.success, answer.error_reason) == (True, None), answer
    assert again == answer
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert [(r["state"], r["tx_hash"]) for r in await claim_rows(sqlite_url)] == [
        (ClaimState.SUCCEEDED, answer.transaction)
    ]
