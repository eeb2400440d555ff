"""`UtcDateTime` on both backends: moments are written in UTC and read back aware; a naive one is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import StatementError

from a2a_x402.storage import UtcDateTime, create_engine

_moments = sa.Table(
    "moments", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True), sa.Column("at", UtcDateTime())
)


async def test_moments_are_stored_in_utc_and_read_back_aware(database_url: str) -> None:
    engine = create_engine(database_url)
    madrid = datetime(2026, 11, 30, 15, 4, 5, 123456, tzinfo=timezone(timedelta(hours=1)))
    naive = datetime(2026, 11, 30, 14, 4, 5)  # noqa: DTZ001 - what is refused
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_moments.metadata.create_all)
            await connection.execute(_moments.insert(), [{"id": 1, "at": madrid}, {"id": 2, "at": None}])
            with pytest.raises(StatementError, match="a stored time needs a zone"):
                await connection.execute(_moments.insert(), {"id": 3, "at": naive})
        async with engine.connect() as connection:
            rows = (await connection.execute(sa.select(_moments).order_by(_moments.c.id))).all()
            earlier = (
                (
                    await connection.execute(
                        sa.select(_moments.c.id).where(
                            _moments.c.at < datetime(2026, 11, 30, 14, 30, tzinfo=UTC)
                        )
                    )
                )
                .scalars()
                .all()
            )
    finally:
        await engine.dispose()

    assert [(row.id, row.at) for row in rows] == [(1, madrid), (2, None)]
    assert rows[0].at.tzinfo is UTC and rows[0].at.hour == 14  # the same moment, in UTC
    assert earlier == [1]  # compared as UTC on SQLite too, where the stored text has no zone
