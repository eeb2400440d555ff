"""The settlements' idempotency keys: unguessable from the task id, the same for every replica and restart
of one deployment, different in another; their table matches its migration (m0009)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from a2a_x402.merchant.payments._keys import SettlementKeys, secrets_table
from a2a_x402.storage import create_engine, upgrade_schema
from tests.fixtures.schema import migration_differences


async def test_the_secrets_table_matches_the_migrations(database_url: str) -> None:
    assert await migration_differences(database_url, secrets_table.metadata) == []


async def test_keys_are_stable_per_deployment_and_carry_no_task_id(database_url: str, tmp_path: Path) -> None:
    another_deployment = f"sqlite+aiosqlite:///{tmp_path / 'elsewhere.db'}"
    await upgrade_schema(another_deployment)
    engine, other_engine, elsewhere_engine = (
        create_engine(database_url),
        create_engine(database_url),
        create_engine(another_deployment),
    )
    try:
        # Two replicas asking at once for the first time keep one secret.
        first, replica = await asyncio.gather(
            SettlementKeys(engine).key("task-1", 1), SettlementKeys(other_engine).key("task-1", 1)
        )
        restarted = await SettlementKeys(engine).key("task-1", 1)
        next_round = await SettlementKeys(engine).key("task-1", 2)
        elsewhere = await SettlementKeys(elsewhere_engine).key("task-1", 1)
    finally:
        for each in (engine, other_engine, elsewhere_engine):
            await each.dispose()

    assert first == replica == restarted
    assert first.startswith("a2a-task:") and "task-1" not in first and len(first) == len("a2a-task:") + 64
    assert next_round != first
    assert elsewhere != first
