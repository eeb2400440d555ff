"""API keys issued per client: created with a name, shown once, stored as a SHA-256, revoked for good.

A key is `x402k_` followed by 32 random bytes (URL-safe base64): 256 bits, so its SHA-256 is as good as a
slow hash, and a request is authenticated by looking the hash up (an index lookup over a digest, which
tells a timing observer nothing about the key). The table (migration m0011) never holds a key. An unknown
key and a revoked one read the same (`None`), so the answer to a caller cannot tell them apart.

`last_used_at` is written at most once a minute per key, so authentication is not a write per request.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write_transaction

from ._caller import Caller

__all__ = [
    "API_KEY_PREFIX",
    "API_KEY_SCHEME",
    "CallerKey",
    "CallerKeyError",
    "CallerKeys",
    "key_principal",
    "token_digest",
]

API_KEY_PREFIX = "x402k_"
"""How every API key begins (so a leaked one is recognisable by secret scanners)."""
API_KEY_SCHEME = "apiKey"
"""The name of the API-key security scheme on the Agent Card."""

_TOKEN_BYTES = 32
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TOUCH_EVERY = timedelta(minutes=1)

_callers = sa.Table(
    "callers",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("token_sha256", sa.String(64), nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("last_used_at", UtcDateTime(), nullable=True),
    sa.Column("revoked_at", UtcDateTime(), nullable=True),
)


class CallerKeyError(ValueError):
    """A key cannot be created or revoked as asked (a one-line reason, never holding a key)."""


@dataclass(frozen=True, slots=True)
class CallerKey:
    """What is known of an issued key (never the key itself)."""

    tenant: str
    name: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def token_digest(token: str) -> str:
    """The hex SHA-256 of a presented token: what the table stores and looks up."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def key_principal(name: str) -> str:
    """The principal of the key named `name`."""
    return f"key:{name}"


class CallerKeys:
    """The API keys of every tenant, in the `callers` table on `engine`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(self, tenant: str, name: str) -> str:
        """Issue a new key named `name` at `tenant` and return it: the only time it is ever shown.

        Raises:
            CallerKeyError: `name` is not 1-64 of letters, digits, `.`, `_`, `-` (starting with a letter
                or digit), or a key of that name exists at `tenant` (revoked names are never reissued).
        """
        if not _NAME.fullmatch(name):
            raise CallerKeyError(
                f"caller name {name[:80]!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a "
                "letter or digit"
            )
        token = API_KEY_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)
        row = {
            "tenant": tenant,
            "name": name,
            "token_sha256": token_digest(token),
            "created_at": datetime.now(UTC),
        }
        try:
            async with write_transaction(self._engine) as connection:
                await connection.execute(_callers.insert().values(**row))
        except IntegrityError:
            raise CallerKeyError(
                f"a caller named {name!r} exists already (names of revoked keys are not reissued)"
            ) from None
        return token

    async def revoke(self, tenant: str, name: str) -> None:
        """Revoke the key named `name` at `tenant`: from now on it authenticates nobody.

        Raises:
            CallerKeyError: no unrevoked key of that name exists at `tenant`.
        """
        statement = (
            _callers.update()
            .where(_callers.c.tenant == tenant, _callers.c.name == name, _callers.c.revoked_at.is_(None))
            .values(revoked_at=datetime.now(UTC))
        )
        async with write_transaction(self._engine) as connection:
            result = await connection.execute(statement)
        if result.rowcount != 1:
            raise CallerKeyError(f"no active caller named {name[:80]!r}")

    async def list(self, tenant: str) -> list[CallerKey]:
        """Every key issued at `tenant`, revoked ones included, oldest first."""
        statement = (
            sa.select(
                _callers.c.tenant,
                _callers.c.name,
                _callers.c.created_at,
                _callers.c.last_used_at,
                _callers.c.revoked_at,
            )
            .where(_callers.c.tenant == tenant)
            .order_by(_callers.c.created_at, _callers.c.id)
        )
        async with self._engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [CallerKey(*row) for row in rows]

    async def authenticate(self, token: str) -> Caller | None:
        """The caller `token` is the key of, or None for an unknown or revoked key (told apart nowhere)."""
        digest = token_digest(token)
        columns = (_callers.c.id, _callers.c.tenant, _callers.c.name, _callers.c.last_used_at)
        statement = sa.select(*columns).where(
            _callers.c.token_sha256 == digest, _callers.c.revoked_at.is_(None)
        )
        async with self._engine.connect() as connection:
            row = (await connection.execute(statement)).first()
        if row is None:
            return None
        now = datetime.now(UTC)
        if row.last_used_at is None or now - row.last_used_at >= _TOUCH_EVERY:
            async with write_transaction(self._engine) as connection:
                await connection.execute(
                    _callers.update().where(_callers.c.id == row.id).values(last_used_at=now)
                )
        tenants = frozenset({row.tenant})
        return Caller(principal=key_principal(row.name), scheme=API_KEY_SCHEME, tenants=tenants)
