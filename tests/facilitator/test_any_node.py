"""The settle suite on every node the facilitator may be pointed at: anvil, Hardhat 3's node and ganache 7.

On each (`node_chain`): a payment verifies and settles, moving the tokens once; a second settle is a
duplicate and the same idempotency key gets the same answer; 50 concurrent settles of one authorization
make one transaction; 50 payers' payments settled at once, some of them presented twice, are each answered
success once, as the chain shows; an outside transaction from the relayer key costs nothing. On Hardhat
and ganache, a chain idle since before a payment became valid does not refuse it (anvil's idle chain has
its own test, by its cheat codes). Nothing here uses a node's cheat codes, so Hardhat and ganache run it as
they come; the fault scenarios that need anvil's stay in the other files.

The concurrent settles and the outside transaction also run with a block every second (`mining`), where a
settle waits for its block and the node's pool holds what is sent meanwhile, and, with the duplicate, on a
ganache started with a block time of its own (`GANACHE_OWN_BLOCK_TIME`, 3 s: the `mining` fixture's
ganache only stops its miner and mines every second), where settlements waiting for their block past the
relayer's revive delay are sent once (ganache would mine a copy sent again). The idle chain does not: a
node mining on an interval mines empty blocks too, so its head is never more than a block time old and a
chain idle since before a payment became valid cannot arise there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator, FacilitatorSettings
from a2a_x402.facilitator.wire import Reason, SettleResponse
from a2a_x402.payer import sign_payment
from tests.fixtures.chain import head_timestamp
from tests.fixtures.deadlines import HANG_S, wait_until, within_deadline
from tests.fixtures.facilitator import PAY_TO, facilitator_settings_on, make_requirements
from tests.fixtures.peer_nodes import GANACHE_OWN_BLOCK_TIME, MINING, NODES, OWN_BLOCK_TIME

from .payments import fund_payers, relayer_address, relayer_nonce, transfer_logs_of, tx_count

# The facilitator's validity margin: how far behind the wall clock validAfter must be on a node that
# simulates in its last block.
_MARGIN_S: int = FacilitatorSettings.model_fields["validity_margin_s"].default

# Every node, and ganache on its own block time.
_EVERY_NODE = [*NODES, GANACHE_OWN_BLOCK_TIME]
# Every node mining each way, and ganache on its own block time.
_EVERY_MINING = [
    *(pytest.param(node, mode, id=f"{node}-{mode}") for node in NODES for mode in MINING),
    pytest.param(GANACHE_OWN_BLOCK_TIME, OWN_BLOCK_TIME, id=GANACHE_OWN_BLOCK_TIME),
]

_PAYERS = 50
# Every `_TWICE_EVERY`th payment is presented twice at once, without an idempotency key.
_TWICE_EVERY = 5
# Each settle's budget (the receipt wait included). ganache is the slow one: on its own 3 s block time it
# builds the block of fifty settlements at about eight a second, so the last receipt comes some 12 s after
# the first send on this machine; the budget leaves as much again for a machine busy with other work.
_SETTLE_BUDGET_S = 30.0


@pytest.fixture
async def service(node_chain: DevChain, sqlite_url: str) -> AsyncIterator[Facilitator]:
    """An in-process facilitator on the node under test, with a fresh SQLite claim store."""
    opened = await Facilitator.open(facilitator_settings_on(node_chain, sqlite_url))
    try:
        yield opened
    finally:
        await opened.aclose()


def _head_number(chain: DevChain) -> int:
    """The number of the node's latest block."""
    return int(chain.rpc.call("eth_blockNumber"), 16)


def _nothing_in_flight(chain: DevChain) -> bool:
    """The relayer's pending count is its mined count: nothing of its own waits in the node's pool."""
    relayer = relayer_address(chain)
    return tx_count(chain, relayer, "pending") == tx_count(chain, relayer, "latest")


async def test_a_payment_verifies_and_settles_moving_the_tokens_once(
    node_chain: DevChain, service: Facilitator
) -> None:
    chain = node_chain
    requirements = make_requirements(chain)
    payload = sign_payment(chain.new_payer(), requirements)
    payer = payload.payload.authorization.from_address
    payer_before, payee_before, nonce_before = (
        chain.balance_of(payer),
        chain.balance_of(PAY_TO),
        relayer_nonce(chain),
    )

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason, verified.payer) == (True, None, payer)
    assert (settled.success, settled.error_reason, settled.payer) == (True, None, payer)
    receipt = chain.rpc.call("eth_getTransactionReceipt", [settled.transaction])
    assert int(receipt["status"], 16) == 1
    assert transfer_logs_of(chain, settled.transaction) == [
        (chain.asset.lower(), payer.lower(), PAY_TO.lower(), requirements.amount)
    ]
    assert (chain.balance_of(payer), chain.balance_of(PAY_TO)) == (
        payer_before - requirements.amount,
        payee_before + requirements.amount,
    )
    assert relayer_nonce(chain) == nonce_before + 1
    assert chain.authorization_state(payer, bytes.fromhex(payload.payload.authorization.nonce[2:]))


@pytest.mark.parametrize("node_chain", _EVERY_NODE, indirect=True)
async def test_a_second_settle_is_a_duplicate_and_a_repeated_key_gets_the_same_answer(
    node_chain: DevChain, service: Facilitator
) -> None:
    chain = node_chain
    requirements = make_requirements(chain)
    payload = sign_payment(chain.new_payer(), requirements)
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)

    first = await service.settle(payload, requirements, idempotency_key="order-1")
    again = await service.settle(payload, requirements, idempotency_key="order-1")
    second = await service.settle(payload, requirements)

    assert first.success
    assert again == first
    assert (second.success, second.error_reason) == (False, Reason.DUPLICATE_SETTLEMENT)
    assert second.extensions == {
        "originalSettlement": {"state": "succeeded", "transaction": first.transaction}
    }
    assert relayer_nonce(chain) == nonce_before + 1
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


@pytest.mark.parametrize(("node_chain", "mining"), _EVERY_MINING, indirect=True)
async def test_fifty_concurrent_settles_of_one_authorization_make_one_transaction(
    node_chain: DevChain, mining: str, service: Facilitator, caplog: pytest.LogCaptureFixture
) -> None:
    chain = node_chain
    requirements = make_requirements(chain)
    payload = sign_payment(chain.new_payer(), requirements)
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)

    with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
        answers = await asyncio.gather(*(service.settle(payload, requirements) for _ in range(50)))

    # Not even a loser's answer came from a claim after the chain went unanswered (ganache's estimates
    # racing a settlement once held their batches to the RPC timeout).
    assert not [r.getMessage() for r in caplog.records if "could not reach the chain" in r.getMessage()]

    [winner] = [a for a in answers if a.success]
    refused = [a for a in answers if not a.success]
    assert {(a.error_reason, a.transaction) for a in refused} == {(Reason.DUPLICATE_SETTLEMENT, "")}
    assert len(refused) == 49
    assert relayer_nonce(chain) == nonce_before + 1
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert transfer_logs_of(chain, winner.transaction)


@pytest.mark.parametrize(("node_chain", "mining"), _EVERY_MINING, indirect=True)
async def test_fifty_payers_settled_at_once_with_duplicates_are_each_answered_as_the_chain_did(
    node_chain: DevChain, mining: str, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    chain = node_chain
    requirements = make_requirements(chain)
    # Each payer holds exactly one payment's worth: a second transfer from any of them could not happen.
    payloads = [sign_payment(key, requirements) for key in fund_payers(chain, _PAYERS, requirements.amount)]
    presented = [*payloads, *payloads[::_TWICE_EVERY]]
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)
    settings = facilitator_settings_on(chain, sqlite_url, receipt_timeout_s=_SETTLE_BUDGET_S)
    service = await Facilitator.open(settings)

    try:
        with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
            # The bound only a settle overrunning its budget reaches, however busy the machine (a settle that
            # runs out of it answers pending, which the assertions below refuse).
            async with asyncio.timeout(within_deadline(_SETTLE_BUDGET_S)):
                answers = await asyncio.gather(*(service.settle(p, requirements) for p in presented))
    finally:
        await service.aclose()

    assert not [r.getMessage() for r in caplog.records if "could not reach the chain" in r.getMessage()]
    assert not [a for a in answers if a.error_reason == Reason.SETTLEMENT_PENDING], "past the budget"
    by_payload: dict[int, list[SettleResponse]] = {}
    for payload, answer in zip(presented, answers, strict=True):
        by_payload.setdefault(id(payload), []).append(answer)
    settled: list[str] = []
    for payload in payloads:
        auth = payload.payload.authorization
        [won] = [a for a in by_payload[id(payload)] if a.success]
        for lost in (a for a in by_payload[id(payload)] if not a.success):
            assert lost.error_reason == Reason.DUPLICATE_SETTLEMENT, lost
            original = (lost.extensions or {}).get("originalSettlement", {})
            assert original.get("transaction") in ("", won.transaction), lost
        # What the chain did: this one transaction moved this payment, and the authorization is used.
        assert (won.payer, won.amount) == (auth.from_address, requirements.amount)
        assert chain.rpc.call("eth_getTransactionReceipt", [won.transaction])["status"] == "0x1"
        assert transfer_logs_of(chain, won.transaction) == [
            (chain.asset.lower(), auth.from_address.lower(), PAY_TO.lower(), requirements.amount)
        ]
        assert chain.authorization_state(auth.from_address, bytes.fromhex(auth.nonce[2:]))
        assert chain.balance_of(auth.from_address) == 0
        settled.append(won.transaction)
    assert len(set(settled)) == _PAYERS
    # Nothing else was sent or mined: one relayer transaction per payer, and the payee paid fifty times.
    assert relayer_nonce(chain) == nonce_before + _PAYERS
    assert chain.balance_of(PAY_TO) == payee_before + _PAYERS * requirements.amount


@pytest.mark.parametrize("node_chain", [GANACHE_OWN_BLOCK_TIME], indirect=True)
async def test_settlements_waiting_for_their_block_past_the_revive_delay_are_sent_once(
    node_chain: DevChain, sqlite_url: str
) -> None:
    """ganache's pending nonce count leaves out its pool, so a settlement waiting for its block, later
    nonces behind it, looks held there; and ganache mines the same signed bytes sent again (or a
    replacement) besides the original. Such a settlement is left to its block: sent once."""
    chain = node_chain
    requirements = make_requirements(chain)
    payloads = [sign_payment(key, requirements) for key in fund_payers(chain, 3, requirements.amount)]
    settings = facilitator_settings_on(
        chain, sqlite_url, relayer_revive_after_s=0.5, receipt_timeout_s=_SETTLE_BUDGET_S
    )
    service = await Facilitator.open(settings)
    try:
        # Sent just after a block, they wait most of a block time: past the revive delay.
        head = _head_number(chain)
        await wait_until(lambda: _head_number(chain) > head, what="the next block")
        first_block, nonce_before = _head_number(chain) + 1, relayer_nonce(chain)
        async with asyncio.timeout(within_deadline(_SETTLE_BUDGET_S)):
            answers = await asyncio.gather(*(service.settle(p, requirements) for p in payloads))
    finally:
        await service.aclose()

    assert [(a.success, a.error_reason) for a in answers] == [(True, None)] * 3, answers
    assert relayer_nonce(chain) == nonce_before + 3
    sent = [
        tx["hash"]
        for number in range(first_block, _head_number(chain) + 1)
        for tx in chain.rpc.call("eth_getBlockByNumber", [hex(number), True])["transactions"]
        if tx["from"].lower() == relayer_address(chain).lower()
    ]
    assert sorted(sent) == sorted(a.transaction for a in answers)


@pytest.mark.parametrize(("node_chain", "mining"), _EVERY_MINING, indirect=True)
async def test_an_outside_transaction_from_the_relayer_key_costs_nothing(
    node_chain: DevChain, mining: str, service: Facilitator
) -> None:
    chain = node_chain
    requirements = make_requirements(chain)
    key = chain.new_payer()
    relayer = relayer_address(chain)
    assert (await service.settle(sign_payment(key, requirements), requirements)).success
    # The operator sends a transaction with the same key by hand: the relayer's next nonce is taken, and
    # the node refuses the next settlement's first send for its nonce, in its own words.
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

    assert (after.success, after.error_reason) == (True, None)
    assert (next_one.success, next_one.error_reason) == (True, None)
    nonces = [
        int(chain.rpc.call("eth_getTransactionByHash", [answer.transaction])["nonce"], 16)
        for answer in (after, next_one)
    ]
    assert nonces == [outside_nonce + 1, outside_nonce + 2]
    # Nothing sent twice: exactly the two settlements moved money and the relayer's count.
    assert chain.balance_of(PAY_TO) == payee_before + 2 * requirements.amount
    assert relayer_nonce(chain) == outside_nonce + 3
    assert _nothing_in_flight(chain)


def _stamps_a_block_now_after(chain: DevChain, moment: int) -> bool:
    """Whether the node would stamp a block mined now later than `moment`, as its pending block tells; a
    pending block that is the head (ganache's) tells nothing, and ganache stamps by this machine's clock."""
    pending, latest = (chain.rpc.call("eth_getBlockByNumber", [tag, False]) for tag in ("pending", "latest"))
    if pending["hash"] == latest["hash"]:
        return time.time() >= moment + 1
    return int(pending["timestamp"], 16) > moment


@pytest.mark.parametrize(
    "node_chain",
    # anvil's idle chain is tests/facilitator/test_chain_time.py's (twenty minutes, by its cheat codes).
    ["hardhat", "ganache"],
    indirect=True,
)
async def test_a_chain_idle_since_before_a_payment_became_valid_does_not_refuse_it(
    node_chain: DevChain, service: Facilitator
) -> None:
    chain = node_chain
    requirements = make_requirements(chain)
    key = chain.new_payer()  # mines the head block this test waits past
    head = head_timestamp(chain.rpc)
    # Valid from a second after the head: by the wall clock when it is sent, not at the head's time (where
    # ganache, whose `pending` block is its head, runs the transfer). Only the wall clock vouches for it
    # there, once validAfter is the validity margin behind it. Hardhat 3 stamps blocks by a clock of its
    # own, behind the wall clock by the whole seconds its start took: until that clock passes validAfter
    # the refusal is true (the next block would revert the transfer), so the test waits for both.
    valid_after = head + 1
    payload = sign_payment(key, requirements, valid_after=valid_after)
    await wait_until(
        lambda: time.time() >= valid_after + _MARGIN_S + 1 and _stamps_a_block_now_after(chain, valid_after),
        what="the wall clock the validity margin past validAfter, and the node's clock past it",
    )
    payee_before = chain.balance_of(PAY_TO)

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (True, None)
    assert (settled.success, settled.error_reason) == (True, None)
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
