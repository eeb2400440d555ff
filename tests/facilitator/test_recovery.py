"""Recovery: a settlement transaction dropped from the pool is broadcast again (or re-sent when its
relayer nonce was taken), a payment settled by someone else's transaction counts as settled (whether it
came before or after ours was sent) if it was mined after the payment was presented, an older one (a copy
of a payment made elsewhere) is refused naming it, a nonce used for another transfer stays refused, and a
reconcile pass releases claims whose owner vanished before broadcasting."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest
import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.devchain import MULTICALL3_ADDRESS, DevChain
from a2a_x402.facilitator import ClaimState, Facilitator
from a2a_x402.facilitator._claims import claims_table
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements, Reason, SettleResponse
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator import PAY_TO, make_requirements

from .conftest import OpenFacilitator
from .payments import (
    claim_rows,
    relayer_address,
    sign_counterfactual,
    sign_exact,
    submit_directly,
    transfer_logs_of,
    tx_count,
)

OTHER_PAYEE = "0x1111111111111111111111111111111111111111"


async def _decided(
    service: Facilitator, payload: PaymentPayload, requirements: PaymentRequirements, key: str
) -> SettleResponse:
    """The first answer that is not pending, from retries with `key`: the service's 0.5 s budget per call
    can end on a busy machine before the receipt of a block mined just before is read."""
    answers: list[SettleResponse] = []

    async def decided() -> bool:
        answers.append(await service.settle(payload, requirements, idempotency_key=key))
        return answers[-1].error_reason != Reason.SETTLEMENT_PENDING

    await wait_until(decided, what=f"a settlement answer for {key} that is not pending")
    return answers[-1]


async def test_a_dropped_settlement_is_broadcast_again_and_mines(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(sqlite_url, receipt_timeout_s=0.5)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    chain.rpc.call("evm_setAutomine", [False])
    pending = await service.settle(payload, requirements, idempotency_key="dropped-1")
    assert pending.error_reason == Reason.SETTLEMENT_PENDING
    chain.rpc.call("anvil_dropTransaction", [pending.transaction])
    assert chain.rpc.call("eth_getTransactionByHash", [pending.transaction]) is None

    again = await service.settle(payload, requirements, idempotency_key="dropped-1")

    assert (again.error_reason, again.transaction) == (Reason.SETTLEMENT_PENDING, pending.transaction)
    assert chain.rpc.call("eth_getTransactionByHash", [pending.transaction]) is not None
    chain.rpc.call("evm_mine")
    settled = await _decided(service, payload, requirements, "dropped-1")
    assert (settled.success, settled.transaction) == (True, pending.transaction)


@pytest.mark.parametrize("payer_kind", ["eoa", "erc6492"])
async def test_a_dropped_settlement_whose_nonce_was_taken_is_resent_with_a_fresh_one(
    payer_kind: str,
    sqlite_url: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
) -> None:
    service = await open_facilitator(
        sqlite_url, receipt_timeout_s=0.5, erc6492_factories=chain.wallet_factory
    )
    requirements = make_requirements(chain)
    if payer_kind == "eoa":
        payload = sign_payment(new_payer(), requirements)
    else:
        # Re-sent to where it was first sent: Multicall3, which deploys the wallet and pays.
        payload, _wallet = sign_counterfactual(chain, requirements)
    chain.rpc.call("evm_setAutomine", [False])
    pending = await service.settle(payload, requirements, idempotency_key="renonce-1")
    chain.rpc.call("anvil_dropTransaction", [pending.transaction])
    relayer = relayer_address(chain)
    chain.rpc.call("anvil_setNonce", [relayer, hex(tx_count(chain, relayer, "pending") + 1)])

    resent = await service.settle(payload, requirements, idempotency_key="renonce-1")

    assert resent.error_reason == Reason.SETTLEMENT_PENDING
    assert resent.transaction not in ("", pending.transaction)
    chain.rpc.call("evm_mine")
    settled = await _decided(service, payload, requirements, "renonce-1")
    assert (settled.success, settled.transaction) == (True, resent.transaction)
    assert [row["tx_hash"] for row in await claim_rows(sqlite_url)] == [resent.transaction]
    first_to = chain.rpc.call("eth_getTransactionByHash", [resent.transaction])["to"]
    assert int(chain.rpc.call("eth_getTransactionReceipt", [resent.transaction])["status"], 16) == 1
    assert first_to.lower() == (chain.asset if payer_kind == "eoa" else MULTICALL3_ADDRESS).lower()


async def test_a_payment_settled_by_someone_else_counts_as_settled_where_foreign_settlements_count(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(sqlite_url, receipt_timeout_s=2.0, count_foreign_settlements=True)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    chain.rpc.call("evm_setAutomine", [False])
    pending = await service.settle(payload, requirements, idempotency_key="front-run-1")
    # Someone else submits the same signed authorization with a higher tip: theirs is mined first.
    chain.rpc.call("anvil_dropTransaction", [pending.transaction])
    chain.rpc.call("evm_setAutomine", [True])
    submit_directly(chain, payload)
    chain.rpc.call("anvil_setNonce", [relayer_address(chain), hex(tx_count(chain, relayer_address(chain)))])

    settled = await service.settle(payload, requirements, idempotency_key="front-run-1")

    assert settled.success is True
    assert settled.transaction != pending.transaction
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert [row["state"] for row in await claim_rows(sqlite_url)] == [ClaimState.SUCCEEDED]


async def test_a_payment_settled_by_someone_else_fails_naming_their_transaction_by_default(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    """Their transaction may be another deployment's settlement for its own purchase: never counted here."""
    service = await open_facilitator(sqlite_url, receipt_timeout_s=2.0)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    chain.rpc.call("evm_setAutomine", [False])
    pending = await service.settle(payload, requirements, idempotency_key="foreign-1")
    chain.rpc.call("anvil_dropTransaction", [pending.transaction])
    chain.rpc.call("evm_setAutomine", [True])
    submit_directly(chain, payload)
    theirs = front_runner_transaction(chain)
    chain.rpc.call("anvil_setNonce", [relayer_address(chain), hex(tx_count(chain, relayer_address(chain)))])

    refused = await service.settle(payload, requirements, idempotency_key="foreign-1")
    again = await service.settle(payload, requirements, idempotency_key="foreign-1")
    other = await service.settle(payload, requirements)

    assert (refused.success, refused.error_reason) == (False, Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED)
    assert refused.error_message is not None and "did not send" in refused.error_message
    assert refused.extensions is not None
    assert refused.extensions["settledElsewhere"]["transaction"] == theirs
    assert again == refused
    assert (other.success, other.error_reason) == (False, Reason.DUPLICATE_SETTLEMENT)
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount  # paid once, by them
    assert [row["state"] for row in await claim_rows(sqlite_url)] == [ClaimState.FAILED]
    assert await service.reconcile() == 0  # a failed claim is final: nothing for a pass to count


async def test_reconcile_releases_a_claim_whose_owner_vanished_before_broadcasting(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(sqlite_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    first = await service.settle(payload, requirements)
    assert first.success
    # Fabricate the trace of a process killed between claiming and broadcasting another authorization.
    orphan = sign_payment(new_payer(), requirements)
    authorization = orphan.payload.authorization
    engine = create_engine(sqlite_url)
    try:
        async with engine.begin() as connection:
            row = (await connection.execute(sa.select(claims_table))).mappings().one()
            long_ago = datetime.now(UTC) - timedelta(hours=1)
            await connection.execute(
                claims_table.insert().values(
                    {
                        **row,
                        "id": "clm_orphan",
                        "payer": authorization.from_address,
                        "nonce": authorization.nonce,
                        "idempotency_key": None,
                        "state": ClaimState.CLAIMED.value,
                        "tx_hash": None,
                        "raw_tx": None,
                        "response": None,
                        "lease_until": long_ago,
                    }
                )
            )
    finally:
        await engine.dispose()

    assert await service.reconcile() == 1

    states = {row["id"]: row["state"] for row in await claim_rows(sqlite_url)}
    assert states["clm_orphan"] == ClaimState.RELEASED
    retried = await service.settle(orphan, requirements)
    assert retried.success is True


def front_runner_transaction(chain: DevChain) -> str:
    """The hash of the one transaction in the latest block (what `submit_directly` just mined)."""
    [tx_hash] = chain.rpc.call("eth_getBlockByNumber", ["latest", False])["transactions"]
    return str(tx_hash)


async def test_an_authorization_front_run_before_settling_settles_with_the_front_runners_transaction(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    """The operator declared this claim store the only one for its payTo: the payer's (or anyone's)
    transaction mined after the payment was presented is its settlement."""
    service = await open_facilitator(database_url, count_foreign_settlements=True)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payer = payload.payload.authorization.from_address
    payer_before, payee_before = chain.balance_of(payer), chain.balance_of(PAY_TO)
    relayer_before = tx_count(chain, relayer_address(chain))
    presented_at = int(time.time())  # the caller took the payment, then someone else submitted it
    submit_directly(chain, payload)
    front_run = front_runner_transaction(chain)

    settled = await service.settle(
        payload, requirements, idempotency_key="front-run-early", presented_at=presented_at
    )
    again = await service.settle(payload, requirements, idempotency_key="front-run-early")
    other = await service.settle(payload, requirements)

    assert (settled.success, settled.transaction, settled.payer) == (True, front_run, payer)
    assert again == settled
    assert (other.success, other.error_reason, other.extensions) == (
        False,
        Reason.DUPLICATE_SETTLEMENT,
        {"originalSettlement": {"state": "succeeded", "transaction": front_run}},
    )
    assert transfer_logs_of(chain, front_run) == [
        (chain.asset.lower(), payer.lower(), PAY_TO.lower(), requirements.amount)
    ]
    assert (chain.balance_of(payer), chain.balance_of(PAY_TO)) == (
        payer_before - requirements.amount,
        payee_before + requirements.amount,
    )
    assert tx_count(chain, relayer_address(chain)) == relayer_before  # the facilitator sent nothing
    [row] = await claim_rows(database_url)
    assert (row["state"], row["tx_hash"], row["idempotency_key"]) == (
        ClaimState.SUCCEEDED,
        front_run,
        "front-run-early",
    )


async def test_an_authorization_front_run_before_settling_is_refused_naming_the_transaction_by_default(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    """Nothing was claimed here, so the transaction may be another deployment's settlement of the same
    authorization (a payer presenting it twice): refused, nothing claimed, nothing sent."""
    service = await open_facilitator(database_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    relayer_before = tx_count(chain, relayer_address(chain))
    presented_at = int(time.time())
    submit_directly(chain, payload)
    theirs = front_runner_transaction(chain)

    refused = await service.settle(
        payload, requirements, idempotency_key="foreign-2", presented_at=presented_at
    )
    again = await service.settle(
        payload, requirements, idempotency_key="foreign-2", presented_at=presented_at
    )

    assert (refused.success, refused.error_reason, refused.transaction) == (
        False,
        Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED,
        "",
    )
    assert refused.error_message is not None and "did not send" in refused.error_message
    assert refused.extensions is not None
    assert refused.extensions["settledElsewhere"]["transaction"] == theirs
    assert again == refused
    assert tx_count(chain, relayer_address(chain)) == relayer_before
    assert await claim_rows(database_url) == []


async def test_a_payment_mined_before_it_was_presented_is_refused_naming_its_transaction(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    """A replay: an authorization that paid this payee elsewhere, copied from the chain for a new purchase."""
    service = await open_facilitator(database_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    submit_directly(chain, payload)
    paid_elsewhere = front_runner_transaction(chain)
    block = chain.rpc.call("eth_getBlockByNumber", ["latest", False])
    # Presented a minute after it was mined: far beyond the clocks' allowed skew.
    presented_at = int(block["timestamp"], 16) + 60
    relayer_before = tx_count(chain, relayer_address(chain))

    replayed = await service.settle(
        payload, requirements, idempotency_key="replay-1", presented_at=presented_at
    )

    assert (replayed.success, replayed.error_reason, replayed.transaction) == (
        False,
        Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED,
        "",
    )
    assert replayed.extensions == {
        "settledElsewhere": {"transaction": paid_elsewhere, "blockNumber": int(block["number"], 16)}
    }
    assert tx_count(chain, relayer_address(chain)) == relayer_before
    assert await claim_rows(database_url) == []


@pytest.mark.parametrize("used_for", ["another payee", "another amount"])
async def test_a_nonce_used_by_a_transfer_that_is_not_this_payment_is_still_refused(
    used_for: str, sqlite_url: str, chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str]
) -> None:
    key = new_payer()
    requirements = make_requirements(chain)
    payload = sign_payment(key, requirements)
    nonce = bytes.fromhex(payload.payload.authorization.nonce[2:])
    # The payer signed another authorization with the same nonce, and it reached the chain first.
    if used_for == "another payee":
        elsewhere = make_requirements(chain, pay_to=OTHER_PAYEE)
    else:
        elsewhere = make_requirements(chain, amount=requirements.amount - 1)
    submit_directly(chain, sign_exact(key, elsewhere, nonce=nonce))
    payee_before = chain.balance_of(PAY_TO)

    settled = await facilitator.settle(payload, requirements)

    assert (settled.success, settled.error_reason, settled.transaction) == (
        False,
        Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED,
        "",
    )
    assert chain.balance_of(PAY_TO) == payee_before
    assert await claim_rows(sqlite_url) == []


def _receipts_aliased(node_url: str, aliases: dict[str, str]) -> Starlette:
    """A JSON-RPC front to `node_url` that answers the receipt of each hash in `aliases` with the receipt of
    the hash it maps to (under the asked hash), as ganache answers for a transaction it mined twice: with
    the later copy's receipt."""

    async def forward(request: Request) -> Response:
        calls = orjson.loads(await request.body())
        batch = isinstance(calls, list)
        asked: dict[Any, str] = {}
        for call in calls if batch else [calls]:
            if call.get("method") == "eth_getTransactionReceipt" and call["params"][0] in aliases:
                asked[call["id"]] = call["params"][0]
                call["params"] = [aliases[call["params"][0]]]
        async with httpx.AsyncClient(timeout=HANG_S) as client:
            answer = await client.post(
                node_url, content=orjson.dumps(calls), headers={"content-type": "application/json"}
            )
        replies = orjson.loads(answer.content)
        for reply in replies if isinstance(replies, list) else [replies]:
            if reply.get("id") in asked and isinstance(reply.get("result"), dict):
                reply["result"]["transactionHash"] = asked[reply["id"]]
        return Response(orjson.dumps(replies), media_type="application/json")

    return Starlette(routes=[Route("/", forward, methods=["POST"])])


@pytest.mark.parametrize("node", ["anvil", "mined-twice"])
async def test_a_settlement_whose_first_copy_paid_while_the_copy_waited_on_reverted_is_a_success(
    node: str,
    sqlite_url: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    asgi_server: Callable[..., str],
) -> None:
    """As on a node that loses track of a transaction in its pool (ganache): the revive step re-sends the
    settlement, both copies are mined, the first pays and the second (the one the claim waits on) reverts
    on the used authorization. The answer is what the chain did: paid, once, by our first copy; even where
    the node answers the paying copy's hash with a reverted receipt ("mined-twice": ganache mines an
    identical transaction twice, and a hash's receipt is then the later, reverted, copy's)."""
    aliases: dict[str, str] = {}
    service = await open_facilitator(sqlite_url, receipt_timeout_s=0.5)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payee_before = chain.balance_of(PAY_TO)
    relayer = relayer_address(chain)
    chain.rpc.call("evm_setAutomine", [False])
    first = await service.settle(payload, requirements, idempotency_key="twice-1")
    assert first.error_reason == Reason.SETTLEMENT_PENDING
    (row,) = await claim_rows(sqlite_url)
    first_raw, first_nonce = row["raw_tx"], row["relayer_nonce"]
    # The node "loses" the first copy and its nonce moves on: the revive step re-sends at a fresh nonce.
    chain.rpc.call("anvil_dropTransaction", [first.transaction])
    chain.rpc.call("anvil_setNonce", [relayer, hex(first_nonce + 1)])
    resent = await service.settle(payload, requirements, idempotency_key="twice-1")
    assert resent.transaction not in ("", first.transaction)
    (row,) = await claim_rows(sqlite_url)
    assert row["tx_hash"] == resent.transaction
    # ...yet the first copy reaches the chain after all, ahead of the second.
    chain.rpc.call("anvil_dropTransaction", [resent.transaction])
    chain.rpc.call("anvil_setNonce", [relayer, hex(first_nonce)])
    for raw in (first_raw, row["raw_tx"]):
        chain.rpc.call("eth_sendRawTransaction", [raw])
        chain.rpc.call("evm_mine")
    assert int(chain.rpc.call("eth_getTransactionReceipt", [first.transaction])["status"], 16) == 1
    assert int(chain.rpc.call("eth_getTransactionReceipt", [resent.transaction])["status"], 16) == 0
    if node == "mined-twice":
        # The answer is asked of a facilitator whose node answers as ganache would.
        aliases[first.transaction] = resent.transaction
        front = asgi_server(_receipts_aliased(chain.rpc_url, aliases))
        service = await open_facilitator(sqlite_url, receipt_timeout_s=5.0, rpc_url=front)

    settled = await _decided(service, payload, requirements, "twice-1")
    again = await service.settle(payload, requirements, idempotency_key="twice-1")

    assert (settled.success, settled.transaction) == (True, first.transaction), settled
    assert (again.success, again.transaction) == (True, first.transaction)
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert [(r["state"], r["tx_hash"]) for r in await claim_rows(sqlite_url)] == [
        (ClaimState.SUCCEEDED, first.transaction)
    ]
