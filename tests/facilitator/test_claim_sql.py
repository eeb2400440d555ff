"""The claim insert and the outcome's update on SQLite's own cursor store the same bytes and read back the
same claim as through SQLAlchemy, run in the transaction and savepoints of the connection they are given."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from a2a_x402.facilitator._claims import _NEW_ATTEMPT, _HotWrites, claims_table

_INSERT = sqlite.insert(claims_table).on_conflict_do_nothing().returning(claims_table.c.id)
_MOMENT = datetime(2026, 12, 1, 21, 30, 15, 123456, tzinfo=UTC)


def _claim(claim_id: str, nonce: str) -> dict[str, Any]:
    return {
        "id": claim_id,
        "chain_id": 84532,
        "asset": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        "payer": "0x2BD786253040452c8aF28bb147C7E202361B98F2",
        "nonce": nonce,
        "idempotency_key": "key-" + claim_id,
        "payload_hash": "0" * 64,
        "network": "eip155:84532",
        "pay_to": "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",
        "amount": 2**256 - 1,
        "valid_before": 2**63 - 1,
        "state": "claimed",
        "attempt": 1,
        "lease_until": _MOMENT + timedelta(seconds=60),
        **_NEW_ATTEMPT,
        "created_at": _MOMENT,
        "updated_at": _MOMENT,
    }


def _outcome(claim_id: str) -> dict[str, Any]:
    return {
        "_id": claim_id,
        "updated_at": _MOMENT + timedelta(seconds=1),
        "response": {"success": True, "transaction": "0x" + "ab" * 32, "extensions": {"n": [1, None]}},
        "state": "succeeded",
        "tx_hash": "0x" + "ab" * 32,
        "block_number": 9,
        "block_hash": "0x" + "cd" * 32,
        "relayer_nonce": 7,
    }


@pytest.fixture
def engine(sqlite_url: str) -> Iterator[sa.Engine]:
    """A migrated SQLite file (its unique keys decide a conflicting insert), through the standard driver."""
    engine = sa.create_engine(make_url(sqlite_url).set(drivername="sqlite"))
    yield engine
    engine.dispose()


def _stored(engine: sa.Engine, claim_id: str) -> tuple[Any, ...]:
    """The row as SQLite holds it, each value with its storage class, but for what names the claim."""
    path = engine.url.database
    assert path is not None
    columns = [column for column in claims_table.c.keys() if column not in ("id", "nonce", "idempotency_key")]
    selected = ", ".join(f"{column}, typeof({column})" for column in columns)
    with sqlite3.connect(path) as connection:
        query = f"SELECT {selected} FROM settlement_claims WHERE id = ?"  # noqa: S608 - our column names
        row = connection.execute(query, (claim_id,))
        return tuple(row.fetchone())


@pytest.mark.parametrize("state", ["claimed", "broadcast"])
def test_the_cursor_stores_and_returns_what_sqlalchemy_does(engine: sa.Engine, state: str) -> None:
    prepared, plain = _HotWrites(_INSERT, sqlite=True), _HotWrites(_INSERT, sqlite=False)
    with engine.begin() as connection:
        for writes, claim_id in ((prepared, "clm_cursor"), (plain, "clm_sqlalchemy")):
            values = _claim(claim_id, "0x" + claim_id.encode().hex().ljust(64, "0"))
            values["state"] = state
            assert writes.insert(connection, values)
            assert not writes.insert(connection, {**values, "id": claim_id + "_again"})
    with engine.begin() as connection:
        by_cursor = prepared.record(connection, _outcome("clm_cursor"))
        by_sqlalchemy = plain.record(connection, _outcome("clm_sqlalchemy"))

    assert _stored(engine, "clm_cursor") == _stored(engine, "clm_sqlalchemy")
    assert by_cursor is not None and by_sqlalchemy is not None
    named = dataclasses.replace(
        by_sqlalchemy, id="clm_cursor", nonce=by_cursor.nonce, idempotency_key="key-clm_cursor"
    )
    assert by_cursor == named
    with engine.begin() as connection:
        assert prepared.record(connection, _outcome("clm_cursor")) is None  # ended: the first answer stands


def test_a_write_on_the_cursor_is_undone_with_its_savepoint(engine: sa.Engine) -> None:
    writes = _HotWrites(_INSERT, sqlite=True)
    with engine.begin() as connection:
        assert writes.insert(connection, _claim("clm_kept", "0x" + "01" * 32))
        with pytest.raises(RuntimeError), connection.begin_nested():
            assert writes.insert(connection, _claim("clm_undone", "0x" + "02" * 32))
            raise RuntimeError("the write's savepoint is rolled back")
    with engine.connect() as connection:
        ids = connection.execute(sa.select(claims_table.c.id)).scalars().all()
    assert ids == ["clm_kept"]


def test_a_driver_error_is_raised_as_sqlalchemy_raises_it(engine: sa.Engine) -> None:
    writes = _HotWrites(_INSERT, sqlite=True)
    with pytest.raises(IntegrityError), engine.begin() as connection:
        writes.insert(connection, {**_claim("clm_no_payer", "0x" + "03" * 32), "payer": None})
