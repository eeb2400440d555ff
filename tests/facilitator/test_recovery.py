"""Recovery: a settlement transaction dropped from the pool is broadcast again (or re-sent when its
relayer nonce was taken), a payment settled by someone else's transaction counts as settled, and a
reconcile pass releases claims whose owner vanished before broadcasting."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from devchain import DevChain
from facilitator import ClaimState
from facilitator._claims import claims_table
from facilitator.wire import Reason
from payer import sign_payment
from storage import create_engine
from tests.fixtures.facilitator import PAY_TO, make_requirements

from .conftest import OpenFacilitator
from .payments import claim_rows, relayer_address, submit_directly, tx_count


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
    settled = await service.settle(payload, requirements, idempotency_key="dropped-1")
    assert (settled.success, settled.transaction) == (True, pending.transaction)


async def test_a_dropped_settlement_whose_nonce_was_taken_is_resent_with_a_fresh_one(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(sqlite_url, receipt_timeout_s=0.5)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    chain.rpc.call("evm_setAutomine", [False])
    pending = await service.settle(payload, requirements, idempotency_key="renonce-1")
    chain.rpc.call("anvil_dropTransaction", [pending.transaction])
    relayer = relayer_address(chain)
    chain.rpc.call("anvil_setNonce", [relayer, hex(tx_count(chain, relayer, "pending") + 1)])

    resent = await service.settle(payload, requirements, idempotency_key="renonce-1")

    assert resent.error_reason == Reason.SETTLEMENT_PENDING
    assert resent.transaction not in ("", pending.transaction)
    chain.rpc.call("evm_mine")
    settled = await service.settle(payload, requirements, idempotency_key="renonce-1")
    assert (settled.success, settled.transaction) == (True, resent.transaction)
    assert [row["tx_hash"] for row in await claim_rows(sqlite_url)] == [resent.transaction]


async def test_a_payment_settled_by_someone_else_counts_as_settled(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(sqlite_url, receipt_timeout_s=2.0)
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
