"""A claim the reconcile pass cannot act on never stops it (issue 25, point 2): claims left behind by crashed
processes are stored beside poisoned ones (a nonce that is not hex, so reading the chain about it raises
ValueError rather than a ChainError); the pass releases the honest one, logs each poisoned one in one line,
reports it to `on_failure`, and the next pass finishes it once its row is repaired."""

from __future__ import annotations

import logging
import secrets
import uuid

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ClaimState
from a2a_x402.facilitator._claims import claims_table
from a2a_x402.storage import create_engine

from .conftest import OpenFacilitator
from .payments import POISON, claim_rows, insert_claims, left_behind


async def _set_nonce(database_url: str, claim_id: str, nonce: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            statement = claims_table.update().where(claims_table.c.id == claim_id).values(nonce=nonce)
            await connection.execute(statement)
    finally:
        await engine.dispose()


async def test_a_poisoned_claim_is_logged_counted_and_retried_while_the_pass_finishes_the_others(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, caplog: pytest.LogCaptureFixture
) -> None:
    service = await open_facilitator(sqlite_url)
    head = chain.rpc.call("eth_blockNumber")
    # The poisoned rows come first: a pass that stopped at one would never reach the honest claim.
    await insert_claims(
        sqlite_url,
        left_behind(chain, "clm_poisoned", nonce=POISON),
        # A recent success whose transaction the node does not know (a reorg), equally poisoned.
        left_behind(
            chain,
            "clm_poisoned_success",
            nonce=POISON + "-2",
            state=ClaimState.SUCCEEDED.value,
            tx_hash="0x" + uuid.uuid4().hex * 2,
            block_number=int(head, 16),
            block_hash="0x" + "00" * 32,
        ),
        left_behind(chain, "clm_orphan"),
    )
    failures: list[None] = []

    with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
        moved = await service.reconcile(on_failure=lambda: failures.append(None))

    states = {row["id"]: row["state"] for row in await claim_rows(sqlite_url)}
    assert (moved, len(failures)) == (1, 2)
    assert states == {
        "clm_poisoned": ClaimState.CLAIMED,
        "clm_poisoned_success": ClaimState.SUCCEEDED,
        "clm_orphan": ClaimState.RELEASED,
    }
    for claim_id in ("clm_poisoned", "clm_poisoned_success"):
        [line] = [r for r in caplog.records if f"claim {claim_id} " in r.getMessage()]
        assert line.exc_info is None and "\n" not in line.getMessage()
        assert "ValueError" in line.getMessage() and "next pass" in line.getMessage()

    # Repaired, both are finished by the next pass: the claimed one released, the reorged success
    # revived (it has no raw transaction to send again, so its hash is awaited).
    await _set_nonce(sqlite_url, "clm_poisoned", "0x" + secrets.token_hex(32))
    await _set_nonce(sqlite_url, "clm_poisoned_success", "0x" + secrets.token_hex(32))
    failures.clear()
    assert await service.reconcile(on_failure=lambda: failures.append(None)) == 2
    assert failures == []
    states = {row["id"]: row["state"] for row in await claim_rows(sqlite_url)}
    assert states["clm_poisoned"] == ClaimState.RELEASED
