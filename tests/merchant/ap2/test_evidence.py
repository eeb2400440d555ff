"""The AP2 evidence of a round (§20.6): kept with the presentation, its receipts added later, never shown
in a `repr`, and purged once past its retention, by a clock the test controls. A merchant that cannot add
a round's receipts to its evidence still ends the round with them, logging one line without them.
(SQLite and PostgreSQL.)"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.devchain import DevChain
from a2a_x402.extension import Ap2Mandates
from a2a_x402.merchant.ap2 import Ap2EvidenceStore, ap2_evidence_metadata
from a2a_x402.storage import create_engine, write, write_transaction
from tests.fixtures.ap2 import issue_open_mandates, new_key
from tests.fixtures.merchant import MerchantWire, RunningMerchant, user_message
from tests.fixtures.schema import migration_differences
from tests.merchant.ap2.shop import status_receipts
from tests.merchant.ap2.test_books import pieces
from tests.merchant.ap2.test_round_outcomes import ONE_PAYMENT, _pay

ACCEPTED = datetime(2026, 12, 5, 12, tzinfo=UTC)


def _token() -> str:
    return ".".join(secrets.token_urlsafe(40) for _ in range(3))


MANDATES = Ap2Mandates(
    checkout_mandate=_token() + "~~" + _token(), payment_mandate=_token() + "~~" + _token()
)
CHECKOUT = _token()


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


async def _keep(
    engine: AsyncEngine,
    task_id: str,
    round_: int,
    mandates: Ap2Mandates = MANDATES,
    *,
    at: datetime = ACCEPTED,
) -> None:
    def operation(connection: sa.Connection) -> None:
        Ap2EvidenceStore.keep_in(
            connection,
            tenant="acme",
            task_id=task_id,
            round_=round_,
            checkout_jwt=CHECKOUT,
            mandates=mandates,
            now=at,
        )

    await write(engine, operation)


async def test_the_table_is_the_one_the_migrations_make(module_database_url: str) -> None:
    assert await migration_differences(module_database_url, ap2_evidence_metadata) == []


async def test_a_rounds_evidence_is_kept_once_with_its_receipts_added_later(engine: AsyncEngine) -> None:
    store = Ap2EvidenceStore(engine)
    await _keep(engine, "task-1", 1)
    # Presented again for its round (T13), with other disclosures: the first presentation stays.
    await _keep(engine, "task-1", 1, Ap2Mandates(checkout_mandate=_token(), payment_mandate=_token()))
    await _keep(engine, "task-1", 2, at=ACCEPTED + timedelta(minutes=5))

    added = await store.add_receipts("task-1", 1, checkout_receipt="c-receipt", payment_receipt="p-receipt")
    nowhere = await store.add_receipts("task-9", 1, checkout_receipt="c", payment_receipt="p")
    first, second = await store.evidence("task-1", 1), await store.evidence("task-1", 2)

    assert added and not nowhere and await store.evidence("task-9", 1) is None
    assert first is not None and second is not None
    assert (first.tenant, first.task_id, first.round, first.created_at) == ("acme", "task-1", 1, ACCEPTED)
    assert (first.checkout_jwt, first.checkout_mandate, first.payment_mandate) == (
        CHECKOUT,
        MANDATES.checkout_mandate,
        MANDATES.payment_mandate,
    )
    assert (first.checkout_receipt, first.payment_receipt) == ("c-receipt", "p-receipt")
    assert (second.checkout_receipt, second.payment_receipt) == (None, None)
    shown = repr(first) + str(first)
    for secret in (CHECKOUT, *MANDATES.checkout_mandate.split("~"), "c-receipt", "p-receipt"):
        assert not secret or secret not in shown
    assert "task-1" in shown


async def test_two_presentations_of_a_round_at_once_keep_one_evidence(engine: AsyncEngine) -> None:
    other = Ap2Mandates(checkout_mandate=_token(), payment_mandate=_token())
    await asyncio.gather(*(_keep(engine, "task-1", 1, mandates) for mandates in (MANDATES, other) * 4))

    assert len(await _rows(engine)) == 1
    kept = await Ap2EvidenceStore(engine).evidence("task-1", 1)
    assert kept is not None and kept.payment_mandate in (MANDATES.payment_mandate, other.payment_mandate)


async def _rows(engine: AsyncEngine) -> list[sa.Row[object]]:
    async with engine.connect() as connection:
        return list((await connection.execute(sa.text("SELECT task_id FROM ap2_evidence"))).all())


async def test_evidence_is_purged_only_once_past_its_retention(engine: AsyncEngine) -> None:
    store = Ap2EvidenceStore(engine, days=400)
    await _keep(engine, "old", 1)
    await _keep(engine, "new", 1, at=ACCEPTED + timedelta(days=30))

    assert await store.purge(now=ACCEPTED + timedelta(days=400)) == 0  # exactly the retention: kept
    assert await store.evidence("old", 1) is not None
    assert await store.purge(now=ACCEPTED + timedelta(days=400, seconds=1)) == 1
    assert await store.evidence("old", 1) is None and await store.evidence("new", 1) is not None
    assert await store.purge(now=ACCEPTED + timedelta(days=430, seconds=1)) == 1
    assert await store.evidence("new", 1) is None
    assert await store.purge(now=ACCEPTED + timedelta(days=9999)) == 0


async def test_a_shorter_retention_purges_sooner_and_none_is_refused(engine: AsyncEngine) -> None:
    await _keep(engine, "task-1", 1)

    assert await Ap2EvidenceStore(engine, days=1).purge(now=ACCEPTED + timedelta(days=1, seconds=1)) == 1
    with pytest.raises(ValueError, match="at least a day"):
        Ap2EvidenceStore(engine, days=0)


_REFUSE_RECEIPTS = {
    "sqlite": [
        "CREATE TRIGGER refuse_receipts BEFORE UPDATE ON ap2_evidence "
        "BEGIN SELECT RAISE(ABORT, 'receipts refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION refuse_receipts() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'receipts refused'; END $$",
        "CREATE TRIGGER refuse_receipts BEFORE UPDATE ON ap2_evidence "
        "FOR EACH ROW EXECUTE FUNCTION refuse_receipts()",
    ],
}


async def test_receipts_the_evidence_cannot_take_still_end_the_round_in_one_line_without_them(
    shop: RunningMerchant,
    engine: AsyncEngine,
    chain: DevChain,
    user_key: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="a2a_x402")
    # The database refuses every change of a kept evidence (its receipts); keeping the mandates still works.
    async with write_transaction(engine) as connection:
        for statement in _REFUSE_RECEIPTS[engine.dialect.name]:
            await connection.execute(sa.text(statement))
    now = int(time.time())
    opened = issue_open_mandates(user_key, new_key(), ONE_PAYMENT, now=now)
    async with shop.http() as http:
        wire = MerchantWire(http, "jsonrpc", "acme")
        task = (await wire.send(user_message()))["task"]
        done, mandates = await _pay(wire, task, chain.new_payer(), opened, now)

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    receipts = status_receipts(done)
    assert receipts is not None
    kept = await Ap2EvidenceStore(engine).evidence(task["id"], 1)
    assert kept is not None and kept.payment_mandate == mandates.payment_mandate
    assert (kept.checkout_receipt, kept.payment_receipt) == (None, None)
    ours = [r for r in caplog.records if r.name.startswith("a2a_x402")]
    [line] = [r.getMessage() for r in ours if "not kept as evidence" in r.getMessage()]
    assert task["id"] in line and "round 1" in line
    assert all(r.levelno < logging.ERROR for r in ours)
    written = "\n".join(r.getMessage() for r in ours)
    secret = {*receipts, *(receipt.rsplit(".", 1)[-1] for receipt in receipts), *pieces([mandates])}
    assert not [piece[:12] for piece in secret if piece in written]
