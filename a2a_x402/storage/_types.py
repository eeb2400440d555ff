"""Column types that keep money exact and times in UTC on every backend."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import DateTime, Numeric, String
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = ["Uint256", "UtcDateTime"]

_DIGITS = 78  # len(str(2**256 - 1))


class Uint256(TypeDecorator[int]):
    """An unsigned 256-bit integer stored exactly, read back as a Python `int`.

    PostgreSQL stores NUMERIC(78, 0). SQLite has no exact type that wide (its NUMERIC affinity turns big
    integers into floats), so there the value is zero-padded decimal text: exact, and its text order is its
    numeric order, so comparisons and ORDER BY still work.
    """

    impl = Numeric(_DIGITS, 0)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(_DIGITS))
        return dialect.type_descriptor(Numeric(_DIGITS, 0, asdecimal=True))

    def process_bind_param(self, value: int | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**256:
            raise ValueError(f"not a uint256: {value!r}")
        if dialect.name == "sqlite":
            return str(value).zfill(_DIGITS)
        return Decimal(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        if value is None:
            return None
        return int(value)


class UtcDateTime(TypeDecorator[datetime]):
    """A moment stored in UTC and read back as an aware UTC `datetime` on every backend.

    SQLite keeps no zone (it hands back naive wall-clock values), so an aware value is turned to UTC before
    it is written and a value read without a zone is UTC. A naive value is refused: its zone is unknown.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"a stored time needs a zone: {value!r}")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
