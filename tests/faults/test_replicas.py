"""The same payment presented to two replicas at once: one settlement, and a true answer from each.

Shown for EIP-3009 and for `upto`, whose payment names the first replica's relayer, the only one that may
settle it (the second must wait for the first, not settle); `exact` by Permit2 races as EIP-3009 does, on
the presentation and the claim, and is left out to keep the suite's time: the second replica waits on the
merchant's presentation, whatever the transfer method, and what Permit2 changes at the claim (its key is
the Permit2 nonce) `upto` shares, and `tests/facilitator/test_settle_permit2.py` races for both schemes.
"""

from __future__ import annotations

import asyncio

import pytest

from a2a_x402.devchain import ANVIL_DEV_KEYS
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import MerchantWire

from .clients import open_task, pay, poll_until_definite
from .conftest import Scenario
from .payments import EIP3009, UPTO, PaymentKind

_SECOND_REPLICA_WAITS_S = 1.0


@pytest.mark.parametrize("kind", [EIP3009.param(), UPTO.param()])
async def test_a_payment_presented_to_both_replicas_is_settled_once_and_never_answered_with_terms(
    kind: PaymentKind,
    scenario: Scenario,
) -> None:
    first, second = await asyncio.gather(
        scenario.start(kind, rpc_url=scenario.proxy.url),
        scenario.start(kind, relayer_key=ANVIL_DEV_KEYS[2]),
    )
    payer_key = scenario.new_payer(kind)
    async with first.http() as first_http, second.http() as second_http:
        at_first, at_second = MerchantWire(first_http, "jsonrpc"), MerchantWire(second_http, "jsonrpc")
        task_id, terms = await open_task(at_first)
        payload = kind.sign(payer_key, terms).wire
        verifying = scenario.proxy.hold(
            b"eth_call", deliver=False
        )  # the first replica sits in its verification
        paying = asyncio.create_task(pay(at_first, task_id, payload))
        await wait_until(verifying.reached.is_set, what="the first replica to verify")
        presented_again = asyncio.create_task(pay(at_second, task_id, payload))
        # The second replica finds the payment being taken and waits for the task to move on, which it
        # does once the first replica's verification is let through (before its RPC timeout).
        await asyncio.sleep(_SECOND_REPLICA_WAITS_S)
        scenario.proxy.release(verifying)
        answered, again = await paying, await presented_again
        done = await poll_until_definite(at_second, task_id)

    assert (answered["status"]["state"], done["status"]["state"]) == ("TASK_STATE_COMPLETED",) * 2
    report = await scenario.invariants(client_views={task_id: "TASK_STATE_COMPLETED"})
    assert [transfer.amount for transfer in report.transfers] == [kind.charged]
    # The second answer may be a task to poll (working) or the outcome; never a request to pay.
    assert again["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED"), again["status"]
