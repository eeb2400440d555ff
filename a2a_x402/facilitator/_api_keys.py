"""The facilitator's API keys: who may call `/verify` and `/settle`, and under which rules.

A key is `x402f_<id>_<secret>`: the id names it in listings and logs, the secret is 32 random bytes. Only
the key's sha256 digest is stored (a key is high-entropy, so a plain digest suffices and looking it up is
one indexed read); the key itself is printed once, when created, and never again. Revoking a key keeps its
row, so a listing still names it and its id is never reused.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write

__all__ = ["ApiKey", "ApiKeyStore", "KeyRules", "api_keys_table", "key_digest"]

metadata = sa.MetaData()

api_keys_table = sa.Table(
    "facilitator_api_keys",
    metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("name", sa.String(80), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False, unique=True),
    sa.Column("rules", sa.JSON, nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("revoked_at", UtcDateTime(), nullable=True),
)

_KEY = re.compile(r"^x402f_([0-9a-f]{16})_[A-Za-z0-9_-]{43}$")
MAX_KEY_CHARS = 80
"""Longer than any key this store makes: a longer credential is refused without being hashed."""


def key_digest(key: str) -> str:
    """The stored form of `key`."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyRules:
    """What a key may settle: only to these payTo addresses and assets (any when empty), at least
    `min_amount` atomic units, at most `settles_per_minute` settle requests (unlimited when None)."""

    pay_to: tuple[str, ...] = ()
    assets: tuple[str, ...] = ()
    min_amount: int = 0
    settles_per_minute: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The rules as stored (addresses lower-cased, so comparisons ignore EIP-55 case)."""
        return {
            "pay_to": [address.lower() for address in self.pay_to],
            "assets": [address.lower() for address in self.assets],
            "min_amount": str(self.min_amount),
            "settles_per_minute": self.settles_per_minute,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyRules:
        """The rules of a stored row."""
        return cls(
            pay_to=tuple(data.get("pay_to") or ()),
            assets=tuple(data.get("assets") or ()),
            min_amount=int(data.get("min_amount") or 0),
            settles_per_minute=data.get("settles_per_minute"),
        )

    def describe(self) -> str:
        """One line for `keys list`."""
        parts = []
        if self.pay_to:
            parts.append("payTo " + ",".join(self.pay_to))
        if self.assets:
            parts.append("assets " + ",".join(self.assets))
        if self.min_amount:
            parts.append(f"min {self.min_amount}")
        if self.settles_per_minute is not None:
            parts.append(f"{self.settles_per_minute} settles/min")
        return "; ".join(parts) or "no rules"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One key as stored (never its secret)."""

    id: str
    name: str
    rules: KeyRules
    created_at: datetime
    revoked_at: datetime | None


def _row(row: sa.Row[Any]) -> ApiKey:
    return ApiKey(
        id=row.id,
        name=row.name,
        rules=KeyRules.from_json(row.rules),
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


class ApiKeyStore:
    """Creates, lists, revokes and recognises API keys in the claim store's database."""

    def __init__(self, engine: AsyncEngine):
        self._engine = engine

    async def create(self, name: str, rules: KeyRules | None = None) -> tuple[ApiKey, str]:
        """A new key named `name`: its record and the key itself, which nothing can show again."""
        key_id = secrets.token_hex(8)
        key = f"x402f_{key_id}_{secrets.token_urlsafe(32)}"
        record = ApiKey(key_id, name, rules or KeyRules(), datetime.now(UTC), None)
        values = {
            "id": key_id,
            "name": name,
            "digest": key_digest(key),
            "rules": record.rules.to_json(),
            "created_at": record.created_at,
            "revoked_at": None,
        }

        def operation(connection: sa.Connection) -> None:
            connection.execute(api_keys_table.insert().values(**values))

        await write(self._engine, operation, isolated=True)
        return record, key

    async def all(self) -> list[ApiKey]:
        """Every key ever created, oldest first, revoked ones included."""
        query = sa.select(api_keys_table).order_by(api_keys_table.c.created_at, api_keys_table.c.id)
        async with self._engine.connect() as connection:
            return [_row(row) for row in (await connection.execute(query)).all()]

    async def revoke(self, key_id: str) -> bool:
        """Revoke the key `key_id` from now on; False if there is no such key or it was revoked already."""
        now = datetime.now(UTC)
        update = (
            api_keys_table.update()
            .where(api_keys_table.c.id == key_id, api_keys_table.c.revoked_at.is_(None))
            .values(revoked_at=now)
        )

        def operation(connection: sa.Connection) -> bool:
            return connection.execute(update).rowcount == 1

        return await write(self._engine, operation, isolated=True)

    async def recognise(self, key: str) -> ApiKey | None:
        """The live (unrevoked) key `key` is, or None: a stranger's, a revoked or a malformed one."""
        if len(key) > MAX_KEY_CHARS or not _KEY.match(key):
            return None
        query = sa.select(api_keys_table).where(
            api_keys_table.c.digest == key_digest(key), api_keys_table.c.revoked_at.is_(None)
        )
        async with self._engine.connect() as connection:
            row = (await connection.execute(query)).first()
        return None if row is None else _row(row)

    async def any_live(self) -> bool:
        """Whether at least one key is unrevoked (the startup line says how to create one otherwise)."""
        query = sa.select(api_keys_table.c.id).where(api_keys_table.c.revoked_at.is_(None)).limit(1)
        async with self._engine.connect() as connection:
            return (await connection.execute(query)).first() is not None
