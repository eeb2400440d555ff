"""The merchant SIGKILLed at each step of settling a paid turn by EIP-3009, then restarted on the same
database (`crashes`: the steps and how the merchant is stopped at each). After the restart the client,
holding only its task id, polls it to a definite answer, and the invariants hold. The same steps for the
Permit2 methods: `test_crash_permit2.py` (`exact`), `test_crash_upto.py` (metered).

A payment front-run while the merchant was down completes the task where foreign settlements count, and
fails it unbooked by default.
"""

from __future__ import annotations

import asyncio

import pytest
from eth_account import Account

from a2a_x402.facilitator.wire import PaymentPayload
from tests.facilitator.payments import submit_directly
from tests.fixtures.merchant import MerchantWire, ledger_entries

from .clients import poll_until_definite
from .conftest import Scenario
from .crashes import STEPS, completed_after_a_restart, killed_at
from .payments import Signed


@pytest.mark.parametrize("step", STEPS)
async def test_a_merchant_killed_mid_settlement_finishes_the_paid_turn_after_a_restart(
    step: str,
    scenario: Scenario,
) -> None:
    merchant, task_id, _ = await killed_at(step, scenario)

    await completed_after_a_restart(merchant, task_id, scenario)


@pytest.mark.parametrize(
    "step",
    [
        pytest.param("settling", id="after the work, before the claim"),
        pytest.param("claimed", id="after the claim, before the broadcast"),
    ],
)
async def test_a_payment_front_run_while_the_merchant_was_down_completes_the_task_after_a_restart(
    step: str,
    scenario: Scenario,
) -> None:
    """Killed before its settlement was broadcast; meanwhile someone else submits the authorization.

    The payee was paid once, by the front-runner's transaction, mined after the merchant took the payment:
    where foreign settlements count (this deployment's database is the only one paying to its payTo),
    recovery settles the task with it, delivers the held work and books it. The order is vouched for by the
    claim where there is one, else by the offer's stored taken time.
    """
    merchant, task_id, stop = await killed_at(step, scenario, count_foreign_settlements=True)
    await asyncio.to_thread(submit_directly, scenario.chain, _eip3009(stop.signed))
    assert stop.used_on_chain()

    report = await completed_after_a_restart(merchant, task_id, scenario)

    [transfer] = report.transfers
    chain = scenario.chain
    on_chain = await asyncio.to_thread(chain.rpc.call, "eth_getTransactionReceipt", [transfer.tx_hash])
    assert on_chain["from"] == Account.from_key(chain.deployer_key).address.lower()  # the front-runner's


@pytest.mark.parametrize(
    "step",
    [
        pytest.param("settling", id="after the work, before the claim"),
        pytest.param("claimed", id="after the claim, before the broadcast"),
    ],
)
async def test_a_payment_front_run_while_the_merchant_was_down_fails_unbooked_after_a_restart_by_default(
    step: str,
    scenario: Scenario,
) -> None:
    """The same, with the default rule: the front-runner's transaction may be another deployment's
    settlement of this authorization, so recovery fails the task, delivers nothing and books nothing."""
    merchant, task_id, stop = await killed_at(step, scenario)
    await asyncio.to_thread(submit_directly, scenario.chain, _eip3009(stop.signed))
    assert stop.used_on_chain()

    restarted = await scenario.merchants.restart(
        merchant, rpc_url=scenario.chain.rpc_url, reconcile_interval_s=0.5, reconcile_stale_after_s=0.5
    )
    async with restarted.http() as http:
        done = await poll_until_definite(MerchantWire(http, "jsonrpc"), task_id)

    assert done["status"]["state"] == "TASK_STATE_FAILED", done["status"]
    assert "artifacts" not in done
    assert await ledger_entries(scenario.database_url) == []
    final_pass = await scenario.merchants.reconcile(restarted)
    assert stop.signed.nonce.lower() in final_pass.stdout + final_pass.stderr


def _eip3009(signed: Signed) -> PaymentPayload:
    assert isinstance(signed.model, PaymentPayload)
    return signed.model
