"""The relayer's account in trouble: out of gas money, or its nonce advanced behind the merchant's back."""

from __future__ import annotations

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import PaymentCompletedData
from a2a_x402.payer import sign_payment
from tests.fixtures.merchant import MerchantWire, payment_data

from .clients import open_task, pay
from .conftest import Scenario


def _relayer(chain: DevChain) -> str:
    return str(Account.from_key(chain.relayer_key).address)


def _sender_nonce(chain: DevChain, tx_hash: str) -> int:
    return int(chain.rpc.call("eth_getTransactionByHash", [tx_hash])["nonce"], 16)


async def test_a_relayer_out_of_gas_money_fails_the_task_uncharged_and_recovers_once_funded(
    scenario: Scenario,
) -> None:
    chain = scenario.chain
    merchant = await scenario.merchants.start()
    payer_key = scenario.new_payer()
    relayer = _relayer(chain)
    funds = chain.rpc.call("eth_getBalance", [relayer, "latest"])
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        broke_task, terms = await open_task(wire)
        chain.rpc.call("anvil_setBalance", [relayer, "0x0"])
        broke = await pay(wire, broke_task, sign_payment(payer_key, terms))
        chain.rpc.call("anvil_setBalance", [relayer, funds])
        funded_task, terms = await open_task(wire)
        funded = await pay(wire, funded_task, sign_payment(payer_key, terms))

    assert broke["status"]["state"] == "TASK_STATE_FAILED"
    assert funded["status"]["state"] == "TASK_STATE_COMPLETED"
    report = await scenario.invariants(
        client_views={broke_task: "TASK_STATE_FAILED", funded_task: "TASK_STATE_COMPLETED"}
    )
    assert report.booked_tasks == [funded_task] and len(report.transfers) == 1


@pytest.mark.parametrize("how", ["a transaction from the same key", "anvil_setNonce"])
async def test_a_relayer_nonce_advanced_by_someone_else_does_not_stop_settlements(
    how: str,
    scenario: Scenario,
) -> None:
    chain = scenario.chain
    merchant = await scenario.merchants.start()
    payer_key = scenario.new_payer()
    relayer = _relayer(chain)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        first_task, terms = await open_task(wire)
        first = await pay(wire, first_task, sign_payment(payer_key, terms))
        assert first["status"]["state"] == "TASK_STATE_COMPLETED"  # the merchant knows its next nonce now
        if how == "anvil_setNonce":
            count = int(chain.rpc.call("eth_getTransactionCount", [relayer, "latest"]), 16)
            chain.rpc.call("anvil_setNonce", [relayer, hex(count + 3)])
        else:
            chain.rpc.transact(chain.relayer_key, to=relayer, data=b"")
        taken = int(chain.rpc.call("eth_getTransactionCount", [relayer, "latest"]), 16)
        second_task, terms = await open_task(wire)
        second = await pay(wire, second_task, sign_payment(payer_key, terms))

    assert second["status"]["state"] == "TASK_STATE_COMPLETED"
    report = await scenario.invariants(
        client_views={first_task: "TASK_STATE_COMPLETED", second_task: "TASK_STATE_COMPLETED"}
    )
    assert sorted(report.booked_tasks) == sorted([first_task, second_task])
    completed = payment_data(second)
    assert isinstance(completed, PaymentCompletedData) and completed.receipts[-1].transaction
    assert _sender_nonce(chain, completed.receipts[-1].transaction) == taken  # the next free nonce
