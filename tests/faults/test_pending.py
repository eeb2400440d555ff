"""A settlement transaction that does not get mined in time: left pending past the deadline, dropped from
the pool, or outlived by its authorization. The client holds a working task and polls it to the end.

Outlived is shown for each transfer method (`payments.KINDS`): whether the authorization can still be used
is then read from Permit2's nonce bitmap and the permit's deadline, and an expired permit reverts in its x402
proxy (whose failure `upto` words its own way) rather than the token. Dropped is shown for EIP-3009 and
`upto`, which stands for both Permit2 methods there (the same bitmap read before the same bytes are sent
again).
"""

from __future__ import annotations

import time

import pytest

from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantWire, ledger_entries

from .clients import open_task, pay, pending_transaction, poll_until_definite
from .conftest import Scenario
from .payments import EIP3009, KINDS, UPTO, PaymentKind


async def test_a_settlement_pending_past_the_deadline_completes_once_mined(scenario: Scenario) -> None:
    merchant = await scenario.merchants.start(settle_timeout_s=1)
    payer_key = scenario.new_payer()
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        scenario.chain.rpc.call("evm_setAutomine", [False])
        answer = await pay(wire, task_id, sign_payment(payer_key, terms))
        tx_hash = pending_transaction(answer)  # past the deadline: a task to poll, naming its transaction
        assert await ledger_entries(scenario.database_url) == []

        scenario.chain.rpc.call("evm_mine")
        done = await poll_until_definite(wire, task_id)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert [t.tx_hash for t in report.transfers] == [tx_hash]
    assert report.booked_tasks == [task_id]


@pytest.mark.parametrize("kind", [EIP3009.param(), UPTO.param()])
async def test_a_settlement_dropped_from_the_pool_is_sent_again_and_completes(
    kind: PaymentKind, scenario: Scenario
) -> None:
    chain = scenario.chain
    merchant = await scenario.start(kind, settle_timeout_s=1)
    payer_key = scenario.new_payer(kind)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        chain.rpc.call("evm_setAutomine", [False])
        tx_hash = pending_transaction(await pay(wire, task_id, kind.sign(payer_key, terms).wire))
        # The node answers with the hash it removed (checked here, not by reading the pool afterwards: the
        # merchant may already have put it back by then).
        assert chain.rpc.call("anvil_dropTransaction", [tx_hash]) == tx_hash

        # The authorization is still valid: the merchant, still waiting, puts the same transaction back.
        await wait_until(
            lambda: chain.rpc.call("eth_getTransactionByHash", [tx_hash]) is not None,
            what="the dropped settlement to be broadcast again",
        )
        chain.rpc.call("evm_mine")
        done = await poll_until_definite(wire, task_id)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert [(t.tx_hash, t.amount) for t in report.transfers] == [(tx_hash, kind.charged)]


@pytest.mark.parametrize("kind", KINDS)
async def test_an_authorization_expiring_while_its_transaction_is_pending_fails_the_task_uncharged(
    kind: PaymentKind,
    scenario: Scenario,
) -> None:
    chain = scenario.chain
    merchant = await scenario.start(kind, settle_timeout_s=1)
    payer_key = scenario.new_payer(kind)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task_id, terms = await open_task(wire)
        # Just valid enough to pass verification (the facilitator wants 6 s of validity left).
        valid_before = int(time.time()) + 10
        signed = kind.sign(payer_key, terms, valid_before=valid_before)
        chain.rpc.call("evm_setAutomine", [False])
        tx_hash = pending_transaction(await pay(wire, task_id, signed.wire))
        payee_before = chain.balance_of(DEFAULT_PAY_TO, asset=kind.asset(chain))

        # The transaction is mined only after the authorization expired: it reverts.
        chain.rpc.call("evm_setNextBlockTimestamp", [valid_before + 1])
        chain.rpc.call("evm_mine")
        receipt = chain.rpc.call("eth_getTransactionReceipt", [tx_hash])
        assert int(receipt["status"], 16) == 0
        done = await poll_until_definite(wire, task_id)

    assert done["status"]["state"] == "TASK_STATE_FAILED"
    assert chain.balance_of(DEFAULT_PAY_TO, asset=kind.asset(chain)) == payee_before
    assert not signed.used_on_chain(chain)
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_FAILED"})
    assert report.transfers == [] and report.booked_tasks == []
