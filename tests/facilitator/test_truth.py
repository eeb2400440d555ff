"""Every answer that a settlement failed or was not sent is checked against the chain first: a node that
took the settlement yet answered its send with an error gets a success once it is mined (pending while it
waits in the pool, or while the chain cannot be read), never "nothing was charged" for a payer who is
charged."""

from __future__ import annotations

from collections.abc import Callable

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ClaimState, Facilitator
from a2a_x402.facilitator.wire import Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.gateways import Gateway, sends_answered_with_an_error

from .conftest import OpenFacilitator
from .payments import claim_rows, transfer_logs_of


async def test_a_send_answered_with_an_error_that_the_chain_mined_is_a_success(
    sqlite_url: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    asgi_server: Callable[..., str],
) -> None:
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    front = asgi_server(sends_answered_with_an_error(chain.rpc_url))
    service = await open_facilitator(sqlite_url, rpc_url=front)

    answer = await service.settle(payload, requirements, idempotency_key="erred-1")
    again = await service.settle(payload, requirements, idempotency_key="erred-1")

    assert (answer.success, answer.error_reason) == (True, None), answer
    assert again == answer
    receipt = chain.rpc.call("eth_getTransactionReceipt", [answer.transaction])
    assert receipt["status"] == "0x1"
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert [(r["state"], r["tx_hash"]) for r in await claim_rows(sqlite_url)] == [
        (ClaimState.SUCCEEDED, answer.transaction)
    ]


async def test_a_send_answered_with_an_error_still_in_the_pool_is_pending_until_mined(
    sqlite_url: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    asgi_server: Callable[..., str],
) -> None:
    """On a chain with block times the errored send waits in the pool: the pending block uses the
    authorization, so the answer is pending, never "nothing was charged"; once mined, the claim is
    recorded from the chain."""
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    front = asgi_server(sends_answered_with_an_error(chain.rpc_url))
    service = await open_facilitator(sqlite_url, rpc_url=front, claim_lease_s=0.2)
    chain.rpc.call("evm_setAutomine", [False])

    answer = await service.settle(payload, requirements, idempotency_key="erred-2")
    chain.rpc.call("evm_mine")
    # Once the claim's lease runs out, a reconcile pass records what the chain did.
    await wait_until(lambda: _reconciled(service), what="a reconcile pass to record the claim")
    again = await service.settle(payload, requirements, idempotency_key="erred-2")

    assert (answer.success, answer.error_reason) == (False, Reason.SETTLEMENT_PENDING), answer
    assert again.success, again
    assert chain.rpc.call("eth_getTransactionReceipt", [again.transaction])["status"] == "0x1"
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


async def _reconciled(service: Facilitator) -> bool:
    return await service.reconcile() == 1


async def test_a_send_answered_with_an_error_when_the_chain_cannot_be_read_is_pending_until_read(
    sqlite_url: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    asgi_server: Callable[..., str],
) -> None:
    """The node took the send it answered with an error, and the reads that would tell fail: the chain has
    not said nothing was charged, so the answer is pending (naming no transaction), not "could not be
    submitted; nothing was charged" for a payer who is charged. Once the chain answers, the claim is
    recorded from it."""
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payer = payload.payload.authorization.from_address
    payee_before = chain.balance_of(PAY_TO)
    gateway = Gateway(down_after_send=True)
    front = asgi_server(sends_answered_with_an_error(chain.rpc_url, gateway))
    service = await open_facilitator(sqlite_url, rpc_url=front, claim_lease_s=0.2)

    answer = await service.settle(payload, requirements, idempotency_key="unread-1")

    assert gateway.down  # the send went through the gateway, and every read since failed
    assert (answer.success, answer.error_reason, answer.transaction) == (
        False,
        Reason.SETTLEMENT_PENDING,
        "",
    ), answer
    assert "nothing was charged" not in (answer.error_message or "")
    # What the chain did meanwhile: the payer was charged.
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert [r["state"] for r in await claim_rows(sqlite_url)] == [ClaimState.CLAIMED]

    gateway.restore()
    await wait_until(lambda: _reconciled(service), what="a reconcile pass to record the claim")
    again = await service.settle(payload, requirements, idempotency_key="unread-1")

    assert (again.success, again.payer) == (True, payer), again
    receipt = chain.rpc.call("eth_getTransactionReceipt", [again.transaction])
    assert receipt["status"] == "0x1"
    assert transfer_logs_of(chain, again.transaction) == [
        (chain.asset.lower(), payer.lower(), PAY_TO.lower(), requirements.amount)
    ]
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
