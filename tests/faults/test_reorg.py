"""A reorg that takes the settlement's block away after the task was delivered and booked.

Re-included (by the chain itself, or put back by the merchant while the authorization is still valid):
the booking stands and reaches its depth. Not re-included until the authorization expired: the booking is
reversed (`settlement.reversed`), and nothing of it is left on the chain. At a depth of two
confirmations the reorg comes before the depth is reached: nothing is delivered, booked or finalized
before the transaction is back on the chain and two blocks deep there, and the invariants are checked at
that depth. A reorg deeper than the depth (a finalized settlement's transaction gone) cannot be undone
by the merchant: `x402-merchant reconcile` reports it and exits 1.

A settlement put back by the merchant, and one removed for good, are shown for the Permit2 methods too
(`payments`): whether the authorization is used, and until when it is valid, are then Permit2's nonce
bitmap and the permit's deadline, and the transfer is found by the permit its transaction settled. One put
back by the merchant is shown for a payment made with AP2 mandates: its booking keeps its AP2 references
and its open mandate counts it once (invariant 8).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantWire, ledger_entries

from .clients import open_offer, open_task, pay, pending_transaction, poll_until_definite
from .conftest import Scenario
from .database import DatabaseProbe
from .payments import AP2, EIP3009, PERMIT2, UPTO, PaymentKind
from .processes import MerchantProcess


async def _paid(
    scenario: Scenario, merchant: MerchantProcess, kind: PaymentKind = EIP3009, *, valid_for_s: int = 300
) -> tuple[str, int]:
    """A task paid by `kind` (a new payer), delivered and booked; its id and when its authorization stops
    being valid (EIP-3009's `validBefore`, the second after a permit's deadline)."""
    payer_key = scenario.new_payer(kind)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms, checkout = await open_offer(wire)
        valid_before = int(time.time()) + valid_for_s
        signed = scenario.sign(kind, payer_key, terms, checkout, valid_before=valid_before)
        done = await pay(wire, task_id, signed.wire, signed.mandates)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    return task_id, valid_before


def _block_hash(chain: DevChain, tx_hash: str) -> str | None:
    receipt = chain.rpc.call("eth_getTransactionReceipt", [tx_hash])
    return None if receipt is None else str(receipt["blockHash"])


def _take_the_last_block_away(chain: DevChain) -> None:
    """The latest block is rolled back and its transactions dropped: the settlement in it is gone."""
    chain.rpc.call("anvil_rollback", [1])
    chain.rpc.call("anvil_dropAllTransactions")


_FINALIZED = "SELECT count(*) FROM ledger_finalizations"
_RECONCILE_INTERVAL_S = 0.5


@pytest.mark.parametrize(
    ("who", "kind"),
    [
        pytest.param("the chain", EIP3009, id="the chain"),
        pytest.param("the merchant", EIP3009, id="the merchant"),
        # Put back by the merchant only: what the chain re-includes is the same bytes whatever they call.
        pytest.param("the merchant", PERMIT2, id="the merchant-permit2"),
        pytest.param("the merchant", UPTO, id="the merchant-upto"),
        pytest.param("the merchant", AP2, id="the merchant-ap2"),
    ],
)
async def test_a_settlement_a_reorg_removed_and_re_included_stays_booked_and_becomes_final(
    who: str,
    kind: PaymentKind,
    scenario: Scenario,
) -> None:
    chain = scenario.chain
    merchant = await scenario.start(kind, reconcile_interval_s=_RECONCILE_INTERVAL_S)
    task_id, _ = await _paid(scenario, merchant, kind)
    (entry,) = await ledger_entries(scenario.database_url)
    block_hash = _block_hash(chain, entry.tx_hash)
    await _reorg(scenario, who, entry.tx_hash)
    assert _block_hash(chain, entry.tx_hash) not in (None, block_hash)
    await wait_until(lambda: _count(scenario.database, _FINALIZED), what="the finalization")

    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert [(t.tx_hash, t.amount) for t in report.transfers] == [(entry.tx_hash, kind.charged)]
    assert report.finalized == 1 and report.events["settlement.finalized"] == 1
    assert report.ap2_booked_tasks == ([task_id] if kind.ap2 else [])


async def _reorg(scenario: Scenario, who: str, tx_hash: str) -> None:
    """The block holding `tx_hash` is replaced; `who` puts the transaction back in the new chain."""
    chain, database = scenario.chain, scenario.database
    if who == "the chain":
        raw = await database.scalar("SELECT raw_tx FROM settlement_claims WHERE tx_hash = :h", h=tx_hash)
        chain.rpc.call("anvil_reorg", [1, [[raw, 0]]])  # a new block at the same height, same transaction
    else:
        # Without automine the merchant's re-broadcast waits in the pool, so the settlement is seen gone
        # before it is back (the merchant re-broadcasts within its reconcile interval, faster than a poll).
        stamp = int(
            chain.rpc.call("eth_getBlockByHash", [_block_hash(chain, tx_hash), False])["timestamp"], 16
        )
        chain.rpc.call("evm_setAutomine", [False])
        _take_the_last_block_away(chain)
        assert _block_hash(chain, tx_hash) is None and not _in_pool(chain, tx_hash)
        # A later stamp than the lost block's: the block it is mined into again is a different block.
        chain.rpc.call("evm_setNextBlockTimestamp", [max(stamp + 1, int(time.time()))])
        # The merchant sees the settlement gone while its authorization is still valid and sends it again.
        await wait_until(lambda: _in_pool(chain, tx_hash), what="the re-broadcast")
        chain.rpc.call("evm_mine")
        chain.rpc.call("evm_setAutomine", [True])


def _in_pool(chain: DevChain, tx_hash: str) -> bool:
    """The transaction is known to the node again (it was dropped with its block)."""
    return chain.rpc.call("eth_getTransactionByHash", [tx_hash]) is not None


@pytest.mark.parametrize("who", ["the chain", "the merchant"])
async def test_at_two_confirmations_a_reorg_before_the_depth_delays_delivery_and_finality_until_re_included(
    who: str,
    scenario: Scenario,
) -> None:
    chain = scenario.chain
    merchant = await scenario.merchants.start(
        confirmations=2, settle_timeout_s=1, reconcile_interval_s=_RECONCILE_INTERVAL_S
    )
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        answer = await pay(wire, task_id, sign_payment(scenario.new_payer(), terms))
        tx_hash = pending_transaction(answer)  # mined, one block deep: not settled yet
        block_hash = _block_hash(chain, tx_hash)
        assert block_hash is not None
        await _nothing_final_yet(wire, task_id, scenario)

        await _reorg(scenario, who, tx_hash)
        assert _block_hash(chain, tx_hash) not in (None, block_hash)
        await _nothing_final_yet(wire, task_id, scenario)  # back, one block deep again

        chain.rpc.call("evm_mine")  # two blocks deep, in the chain as it now is
        done = await poll_until_definite(wire, task_id)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    await wait_until(lambda: _count(scenario.database, _FINALIZED), what="the finalization")

    report = await scenario.invariants(confirmations=2, client_views={task_id: "TASK_STATE_COMPLETED"})
    assert [t.tx_hash for t in report.transfers] == [tx_hash]
    assert report.finalized == 1 and report.events["settlement.finalized"] == 1
    assert await scenario.database.scalar("SELECT confirmations FROM ledger_finalizations") >= 2


async def test_at_two_confirmations_a_reorg_before_the_depth_not_re_included_fails_the_task_uncharged(
    scenario: Scenario,
) -> None:
    chain = scenario.chain
    merchant = await scenario.merchants.start(
        confirmations=2, settle_timeout_s=1, reconcile_interval_s=_RECONCILE_INTERVAL_S
    )
    payee_before = chain.balance_of(DEFAULT_PAY_TO)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        # Just valid enough to pass verification (the facilitator wants 6 s of validity left).
        valid_before = int(time.time()) + 10
        answer = await pay(
            wire, task_id, sign_payment(scenario.new_payer(), terms, valid_before=valid_before)
        )
        tx_hash = pending_transaction(answer)  # mined, one block deep: not settled yet
        assert _block_hash(chain, tx_hash) is not None

        chain.rpc.call("evm_setAutomine", [False])  # what the merchant puts back stays in the pool
        _take_the_last_block_away(chain)
        await _nothing_final_yet(wire, task_id, scenario)

        # Two blocks after the authorization expired: whatever was put back reverts, nothing lands.
        chain.rpc.call("evm_setNextBlockTimestamp", [valid_before + 1])
        chain.rpc.call("evm_mine")
        chain.rpc.call("evm_mine")
        done = await poll_until_definite(wire, task_id)

    assert done["status"]["state"] == "TASK_STATE_FAILED"
    assert chain.balance_of(DEFAULT_PAY_TO) == payee_before
    report = await scenario.invariants(confirmations=2, client_views={task_id: "TASK_STATE_FAILED"})
    assert report.transfers == [] and report.booked_tasks == [] and report.finalized == 0


async def _nothing_final_yet(wire: MerchantWire, task_id: str, scenario: Scenario) -> None:
    """Several reconcile passes go by: the task is still working, nothing is booked or finalized."""
    await asyncio.sleep(4 * _RECONCILE_INTERVAL_S)
    assert (await wire.get_task(task_id))["status"]["state"] == "TASK_STATE_WORKING"
    assert await ledger_entries(scenario.database_url) == []
    assert await scenario.database.scalar(_FINALIZED) == 0


# `upto` stands for both Permit2 methods here (its permit's deadline, its nonce in Permit2's bitmap), and
# for a booking of the usage rather than the price: each case waits out a 30 s authorization.
@pytest.mark.parametrize("kind", [EIP3009.param(), UPTO.param()])
async def test_a_settlement_a_reorg_removed_for_good_is_reversed(
    kind: PaymentKind, scenario: Scenario
) -> None:
    chain = scenario.chain
    merchant = await scenario.start(kind)
    # Valid long enough that paying, stopping the merchant and starting the first reconcile all fit in it
    # on a loaded machine (at 9 s a busy run reconciled after expiry), yet short enough to wait out cheaply.
    task_id, valid_before = await _paid(scenario, merchant, kind, valid_for_s=30)
    merchant.stop()
    (entry,) = await ledger_entries(scenario.database_url)
    chain.rpc.call("evm_setAutomine", [False])  # nothing is mined again until the test says so
    _take_the_last_block_away(chain)

    still_valid = await scenario.merchants.reconcile(merchant)
    assert "reversed 0" in still_valid.stdout, still_valid  # it may still land: left alone
    await asyncio.sleep(max(valid_before + 1 - time.time(), 0))
    expired = await scenario.merchants.reconcile(merchant)
    assert "reversed 1" in expired.stdout, expired
    assert expired.returncode == 0, expired  # resolved: nothing left to report
    chain.rpc.call("evm_mine")  # whatever was put back in the pool cannot pay any more

    report = await scenario.invariants(
        expect_reversed={task_id}, client_views={task_id: "TASK_STATE_COMPLETED"}
    )
    assert report.transfers == [] and report.reversed_tasks == [task_id]
    assert report.events["settlement.reversed"] == 1 and report.finalized == 0
    receipt = chain.rpc.call("eth_getTransactionReceipt", [entry.tx_hash])
    assert receipt is None or int(receipt["status"], 16) == 0  # put back, it reverted: expired


async def _count(database: DatabaseProbe, statement: str) -> bool:
    return bool(await database.scalar(statement))


async def test_a_reorg_deeper_than_the_depth_is_reported_and_reconcile_exits_1(scenario: Scenario) -> None:
    chain = scenario.chain
    merchant = await scenario.merchants.start(reconcile_interval_s=_RECONCILE_INTERVAL_S)
    task_id, _ = await _paid(scenario, merchant)
    await wait_until(lambda: _count(scenario.database, _FINALIZED), what="the finalization")
    merchant.stop()
    (entry,) = await ledger_entries(scenario.database_url)
    clean = await scenario.merchants.reconcile(merchant)
    assert (clean.returncode, clean.stderr.count("unresolved")) == (0, 0), clean

    chain.rpc.call("evm_setAutomine", [False])  # what the merchant puts back stays in the pool
    _take_the_last_block_away(chain)
    deep = await scenario.merchants.reconcile(merchant)

    assert deep.returncode == 1, deep
    assert (
        f"unresolved: {(await _entry_id(scenario.database))}: finalized, but {entry.tx_hash}" in deep.stderr
    ), deep
    assert "reversed 0" in deep.stdout  # final means final: an operator decides, not the reconciler
    with pytest.raises(AssertionError, match="2: entry .* has no transfer on chain"):
        await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})


async def _entry_id(database: DatabaseProbe) -> str:
    return str(await database.scalar("SELECT id FROM ledger_entries WHERE kind = 'settlement'"))
