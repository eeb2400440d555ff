"""The SQLAlchemy models and migration m0002 describe the same ledger tables, on both backends."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection

from merchant.ledger import LedgerBase
from storage import create_engine


def _differences(connection: Connection, metadata: sa.MetaData) -> list[Any]:
    ours = set(metadata.tables)

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", None)
        return table in ours

    context = MigrationContext.configure(connection, opts={"compare_type": True, "include_object": include})
    return list(compare_metadata(context, metadata))


async def test_models_match_the_migration(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(_differences, LedgerBase.metadata)
    finally:
        await engine.dispose()
    assert differences == []
    assert set(LedgerBase.metadata.tables) == {
        "ledger_accounts",
        "ledger_entries",
        "ledger_finalizations",
        "ledger_lines",
        "ledger_sequence",
    }
