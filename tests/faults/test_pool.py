"""The five invariants with the relayer pool and fee bumping on: merchant replicas sharing four leased keys
under concurrent paid turns (one payment presented at both), a replica SIGKILLed mid-settlement whose keys
another takes over after the lease (both for EIP-3009 and `upto`, whose payment names one key), and a
base-fee spike in the middle of a paid turn, for each transfer method (`payments.KINDS`: the replacement
carries the same call, an `upto` one from the key its payer named)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from eth_account import Account

from a2a_x402.devchain import ANVIL_DEV_KEYS, DevChain
from tests.fixtures.a2a_errors import A2ACallError
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import MerchantWire

from .clients import JSON, open_task, pay, poll_until_definite
from .conftest import Scenario
from .payments import EIP3009, KINDS, UPTO, PaymentKind
from .processes import MerchantProcess

FOUR_KEYS = ANVIL_DEV_KEYS[4:8]
RELAYERS = {Account.from_key(key).address for key in FOUR_KEYS}
PAYERS = 8
_BROADCAST = "SELECT count(*) FROM settlement_claims WHERE state = 'broadcast'"
_REPLACEMENTS = "SELECT count(*) FROM settlement_transactions"


def _unmined(chain: DevChain) -> dict[str, int]:
    """Per pool key, how many of its nonces the node holds unmined (zero: gap-free, nothing stuck)."""
    return {
        relayer: int(chain.rpc.call("eth_getTransactionCount", [relayer, "pending"]), 16)
        - int(chain.rpc.call("eth_getTransactionCount", [relayer, "latest"]), 16)
        for relayer in RELAYERS
    }


async def _claim_nonces(scenario: Scenario) -> list[tuple[str, int]]:
    rows = await scenario.database.scalar(
        "SELECT json_agg(json_build_array(relayer, relayer_nonce)) FROM settlement_claims"
    )
    return [(relayer, nonce) for relayer, nonce in rows or []]


# `upto` stands for both Permit2 methods, and is the one whose payment names a key: the replica that
# offered it holds that key. Presented at the other, which does not, the turn there asks again and leaves
# the settlement to recovery, which the replica holding the key finishes: reconciling often keeps it short.
@pytest.mark.parametrize(("kind", "reconcile_s"), [(EIP3009, 30.0), (UPTO, 2.0)], ids=["eip3009", "upto"])
async def test_two_replicas_sharing_four_keys_settle_every_payment_once(
    kind: PaymentKind, reconcile_s: float, scenario: Scenario
) -> None:
    first, second = await asyncio.gather(
        _start(scenario, kind=kind, max_keys=2, reconcile_s=reconcile_s),
        _start(scenario, kind=kind, max_keys=2, reconcile_s=reconcile_s),
    )
    async with first.http() as first_http, second.http() as second_http:
        wires = [MerchantWire(first_http, "jsonrpc"), MerchantWire(second_http, "jsonrpc")]

        async def one(i: int) -> tuple[str, JSON]:
            wire = wires[i % 2]
            task_id, terms = await open_task(wire)
            payload = kind.sign(scenario.new_payer(kind), terms).wire
            if i % 4 == 0:  # the same payment at both replicas at once
                answers = await asyncio.gather(
                    pay(wire, task_id, payload),
                    pay(wires[1 - i % 2], task_id, payload),
                    return_exceptions=True,
                )
                # One that arrives once the other replica has finished the task is answered as any message
                # to a finished task is (spec's task-finished.error example); at least one gets the task.
                for late in (a for a in answers if isinstance(a, BaseException)):
                    if not (isinstance(late, A2ACallError) and late.reason == "UNSUPPORTED_OPERATION"):
                        raise late
                [answer, *_] = [a for a in answers if not isinstance(a, BaseException)]
            else:
                answer = await pay(wire, task_id, payload)
            return task_id, answer

        runs = await asyncio.gather(*(one(i) for i in range(PAYERS)))
        done = {task_id: await poll_until_definite(wires[0], task_id) for task_id, _ in runs}

    assert Counter(task["status"]["state"] for task in done.values()) == {"TASK_STATE_COMPLETED": PAYERS}
    report = await scenario.invariants(client_views={t: "TASK_STATE_COMPLETED" for t in done})
    assert len(report.transfers) == PAYERS and sorted(report.booked_tasks) == sorted(done)
    assert {transfer.amount for transfer in report.transfers} == {kind.charged}
    nonces = await _claim_nonces(scenario)
    assert {relayer for relayer, _ in nonces} <= RELAYERS and len(set(nonces)) == len(nonces) == PAYERS
    assert set(_unmined(scenario.chain).values()) == {0}


# `upto`: the payment names a key of the killed replica, which the taker must hold to finish it.
@pytest.mark.parametrize("kind", [EIP3009.param(), UPTO.param()])
async def test_a_replica_killed_mid_settlement_has_its_keys_taken_over_and_its_turn_finished(
    kind: PaymentKind,
    scenario: Scenario,
) -> None:
    chain = scenario.chain
    doomed = await _start(scenario, kind=kind)
    async with doomed.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        payer_key, again_key = scenario.new_payer(kind), scenario.new_payer(kind)  # while blocks are mined
        chain.rpc.call("evm_setAutomine", [False])  # the settlement stays in the pool
        paying = asyncio.ensure_future(pay(wire, task_id, kind.sign(payer_key, terms).wire))
        await wait_until(lambda: _count(scenario, _BROADCAST), what="the settlement to be broadcast")
        doomed.kill()
        await asyncio.gather(paying, return_exceptions=True)
    taker = await _start(scenario, kind=kind, reconcile_s=0.5)
    chain.rpc.call("evm_setAutomine", [True])
    chain.rpc.call("evm_mine")
    async with taker.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        done = await poll_until_definite(wire, task_id)
        # The taken-over keys settle new payments too.
        again_id, terms = await open_task(wire)
        again = await pay(wire, again_id, kind.sign(again_key, terms).wire)
        again = (
            again
            if again["status"]["state"] != "TASK_STATE_WORKING"
            else await poll_until_definite(wire, again_id)
        )

    assert (done["status"]["state"], again["status"]["state"]) == ("TASK_STATE_COMPLETED",) * 2
    views = {task_id: "TASK_STATE_COMPLETED", again_id: "TASK_STATE_COMPLETED"}
    report = await scenario.invariants(client_views=views)
    assert [transfer.amount for transfer in report.transfers] == [kind.charged] * 2
    nonces = await _claim_nonces(scenario)
    assert len(set(nonces)) == 2 and set(_unmined(chain).values()) == {0}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_paid_turn_through_a_base_fee_spike_is_settled_once_by_the_replacement(
    kind: PaymentKind,
    scenario: Scenario,
) -> None:
    chain = scenario.chain
    merchant = await _start(scenario, kind=kind)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        payer_key = scenario.new_payer(kind)  # minted (and Permit2 approved) while blocks are still mined
        chain.rpc.call("evm_setAutomine", [False])
        paying = asyncio.ensure_future(pay(wire, task_id, kind.sign(payer_key, terms).wire))
        await wait_until(lambda: _count(scenario, _BROADCAST), what="the settlement to be broadcast")
        pending = chain.rpc.call("txpool_content")["pending"]
        (tx,) = [tx for txs in pending.values() for tx in txs.values()]
        chain.rpc.call("anvil_setNextBlockBaseFeePerGas", [hex(3 * int(tx["maxFeePerGas"], 16))])
        await wait_until(lambda: _count(scenario, _REPLACEMENTS), what="the settlement to be replaced")
        chain.rpc.call("evm_mine")
        await paying
        done = await poll_until_definite(wire, task_id)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    (transfer,) = report.transfers
    assert transfer.tx_hash != tx["hash"]  # the replacement was mined, and it is the booked settlement
    assert transfer.amount == kind.charged
    replacement = chain.rpc.call("eth_getTransactionByHash", [transfer.tx_hash])
    # The same call from the same key (an `upto` one must come from the key its payer named).
    assert [replacement[f] for f in ("from", "to", "input")] == [tx[f] for f in ("from", "to", "input")]
    assert set(_unmined(chain).values()) == {0}


async def _start(
    scenario: Scenario,
    *,
    kind: PaymentKind = EIP3009,
    max_keys: int = len(FOUR_KEYS),
    reconcile_s: float = 30.0,
) -> MerchantProcess:
    """A merchant paid by `kind` with the pool of four keys (at most `max_keys` of them) and fee bumping
    after 0.5 s."""
    return await scenario.start(
        kind,
        relayer_key=FOUR_KEYS[0],
        relayer_keys=",".join(FOUR_KEYS),
        relayer_max_keys=max_keys,
        fee_bump_after_s=0.5,
        reconcile_interval_s=reconcile_s,
        reconcile_stale_after_s=reconcile_s,
    )


async def _count(scenario: Scenario, statement: str) -> bool:
    return bool(await scenario.database.scalar(statement))
