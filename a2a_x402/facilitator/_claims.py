"""Durable settlement claims: at most one broadcast per authorization, across processes.

A claim row keyed by (chain id, asset, payer, nonce) is inserted *before* anything is broadcast: for an
EIP-3009 authorization the asset is the token; for a Permit2 one it is Permit2, whose nonces are the payer's
across every token, and the token moved is the row's `token`. The database's unique constraint decides the
race between concurrent settles of one authorization, in one process or in replicas sharing PostgreSQL:
exactly one insert wins, and only its owner may broadcast.

States::

    claimed ──► broadcast ──► succeeded        (receipt status 1, Transfer log checked, depth reached)
       │            └───────► failed           (status 0, or no matching Transfer log)
       ├──────────► released                   (refused before any broadcast; may be claimed again)
       └──────────► succeeded                  (an `upto` settlement of 0: nothing to send, no transaction)

Each claim stores the answer given for it. Only an unfinished claim's answer may change (a pending answer
becomes the final one); once a claim has ended, the first final answer stands, so every later answer about
it is the same document.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import Uint256, UtcDateTime, write

from ._claim_sql import PreparedStatement
from ._errors import IdempotencyConflictError

__all__ = ["Claim", "ClaimKey", "ClaimState", "ClaimStore", "claims_table"]

metadata = sa.MetaData()

claims_table = sa.Table(
    "settlement_claims",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("chain_id", sa.BigInteger, nullable=False),
    sa.Column("asset", sa.String(42), nullable=False),
    sa.Column("payer", sa.String(42), nullable=False),
    sa.Column("nonce", sa.String(66), nullable=False),
    sa.Column("idempotency_key", sa.String(255), nullable=True),
    sa.Column("payload_hash", sa.String(64), nullable=False),
    sa.Column("network", sa.String(64), nullable=False),
    sa.Column("pay_to", sa.String(42), nullable=False),
    sa.Column("amount", Uint256(), nullable=False),
    sa.Column("valid_before", Uint256(), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("lease_until", UtcDateTime(), nullable=False),
    sa.Column("relayer", sa.String(42), nullable=True),
    sa.Column("relayer_nonce", sa.BigInteger, nullable=True),
    sa.Column("tx_hash", sa.String(66), nullable=True),
    sa.Column("raw_tx", sa.Text, nullable=True),
    sa.Column("block_number", sa.BigInteger, nullable=True),
    sa.Column("block_hash", sa.String(66), nullable=True),
    sa.Column("error_reason", sa.String(80), nullable=True),
    sa.Column("response", sa.JSON, nullable=True),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    sa.Column("token", sa.String(42), nullable=True),
)


class ClaimState(StrEnum):
    """Where a claimed authorization stands; see the module docstring for the transitions."""

    CLAIMED = "claimed"
    BROADCAST = "broadcast"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RELEASED = "released"


@dataclass(frozen=True, slots=True)
class ClaimKey:
    """What identifies one authorization on one chain: its token's EIP-3009 nonce, or its Permit2 nonce
    (`asset` then Permit2's address)."""

    chain_id: int
    asset: str
    payer: str
    nonce: str


@dataclass(frozen=True, slots=True)
class Claim:
    """A row of `settlement_claims`."""

    id: str
    chain_id: int
    asset: str
    payer: str
    nonce: str
    idempotency_key: str | None
    payload_hash: str
    network: str
    pay_to: str
    amount: int
    valid_before: int
    state: ClaimState
    attempt: int
    lease_until: datetime
    relayer: str | None
    relayer_nonce: int | None
    tx_hash: str | None
    raw_tx: str | None
    block_number: int | None
    block_hash: str | None
    error_reason: str | None
    response: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    token: str | None = None

    @property
    def key(self) -> ClaimKey:
        """The authorization this claim is for."""
        return ClaimKey(self.chain_id, self.asset, self.payer, self.nonce)

    @property
    def moved_token(self) -> str:
        """The ERC-20 the settlement moves: `token` for a Permit2 claim, else the asset itself."""
        return self.token or self.asset

    @property
    def lease_expired(self) -> bool:
        """Whether the owner of a `claimed` row has been silent for longer than its lease."""
        return self.lease_until < _now()


def _now() -> datetime:
    return datetime.now(UTC)


# What an attempt starts without: a transaction (an earlier attempt's may have reverted) and an outcome.
_NEW_ATTEMPT: dict[str, None] = {
    "relayer": None,
    "relayer_nonce": None,
    "tx_hash": None,
    "raw_tx": None,
    "block_number": None,
    "block_hash": None,
    "error_reason": None,
    "response": None,
}

# Statements built once: the columns a call sets come from its parameters (SQLAlchemy caches the compiled
# form per set of columns), which costs far less than building a statement for every write.
_UPDATE = claims_table.update().where(claims_table.c.id == sa.bindparam("_id"))
_RECORD_RESPONSE = (
    claims_table.update()
    .where(
        claims_table.c.id == sa.bindparam("_id"),
        # Two equalities, not IN: an IN list is a parameter SQLAlchemy expands at every execution.
        sa.or_(
            claims_table.c.state == ClaimState.CLAIMED.value,
            claims_table.c.state == ClaimState.BROADCAST.value,
        ),
    )
    .returning(*claims_table.c)
)


def _first(
    connection: sa.Connection, statement: sa.Executable, parameters: dict[str, Any] | None = None
) -> sa.Row[Any] | None:
    return connection.execute(statement, parameters).first()


def _row(row: sa.Row[Any] | dict[str, Any]) -> Claim:
    values: dict[str, Any] = dict(row) if isinstance(row, dict) else dict(row._mapping)
    values["state"] = ClaimState(values["state"])
    return Claim(**values)


class _HotWrites:
    """The claim insert and the outcome's update of every settlement: on SQLite through
    `PreparedStatement` (one per set of columns, compiled on first use), elsewhere through SQLAlchemy."""

    def __init__(self, insert: sa.Insert, *, sqlite: bool):
        self._insert = insert
        self._sqlite = sqlite
        self._prepared: dict[tuple[object, ...], PreparedStatement] = {}

    def insert(self, connection: sa.Connection, values: dict[str, Any]) -> bool:
        """Insert the claim `values`; whether it was inserted (False: one of its unique keys is taken)."""
        if not self._sqlite:
            return _first(connection, self._insert, values) is not None
        return (
            self._statement(connection, self._insert, values, (claims_table.c.id,)).first(connection, values)
            is not None
        )

    def record(self, connection: sa.Connection, values: dict[str, Any]) -> Claim | None:
        """`_RECORD_RESPONSE` with `values`: the claim as stored, or None if it had already ended."""
        if not self._sqlite:
            row = _first(connection, _RECORD_RESPONSE, values)
            return _row(row) if row is not None else None
        stored = self._statement(connection, _RECORD_RESPONSE, values, tuple(claims_table.c)).first(
            connection, values
        )
        return _row(stored) if stored is not None else None

    def _statement(
        self,
        connection: sa.Connection,
        statement: sa.Insert | sa.Update,
        values: dict[str, Any],
        returning: tuple[sa.Column[Any], ...],
    ) -> PreparedStatement:
        keys = (statement, *values)
        prepared = self._prepared.get(keys)
        if prepared is None:
            prepared = PreparedStatement(statement, connection.dialect, list(values), returning)
            self._prepared[keys] = prepared
        return prepared


class ClaimStore:
    """Inserts, looks up and advances settlement claims."""

    def __init__(self, engine: AsyncEngine, *, lease_s: float = 60.0, poll_s: float = 0.05):
        self._engine = engine
        dialect_insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert
        insert = dialect_insert(claims_table).on_conflict_do_nothing().returning(claims_table.c.id)
        self._writes = _HotWrites(insert, sqlite=engine.dialect.name == "sqlite")
        self._lease = timedelta(seconds=lease_s)
        self._poll_s = poll_s
        # Waiters in this process wake on these at once; claims advanced by another process are polled.
        self._changed: dict[str, asyncio.Event] = {}

    async def claim(
        self,
        key: ClaimKey,
        *,
        idempotency_key: str | None,
        payload_hash: str,
        network: str,
        pay_to: str,
        amount: int,
        valid_before: int,
        token: str | None = None,
    ) -> tuple[Claim, bool]:
        """Claim `key`. Returns (claim, True) when this call inserted it, else (the existing claim, False).

        `valid_before` is the first unix time the chain refuses the authorization at; `token` the ERC-20 a
        Permit2 authorization moves.

        The existing claim is the one `find` returns: the one for the same authorization, or failing that the
        one holding the same idempotency key (a key reused for another authorization).
        """
        now = _now()
        claim = Claim(
            id="clm_" + secrets.token_hex(16),
            chain_id=key.chain_id,
            asset=key.asset,
            payer=key.payer,
            nonce=key.nonce,
            idempotency_key=idempotency_key,
            payload_hash=payload_hash,
            network=network,
            pay_to=pay_to,
            amount=amount,
            valid_before=valid_before,
            state=ClaimState.CLAIMED,
            attempt=1,
            lease_until=now + self._lease,
            **_NEW_ATTEMPT,
            created_at=now,
            updated_at=now,
            token=token,
        )
        values = {column: getattr(claim, column) for column in claims_table.c.keys()}
        values["state"] = claim.state.value
        # ON CONFLICT DO NOTHING: losing the race on either unique key is an answer, not an error.
        if await write(self._engine, lambda connection: self._writes.insert(connection, values)):
            return claim, True
        existing = await self.find(key, idempotency_key)
        if existing is None:
            raise LookupError(f"claim for {key} conflicted but cannot be found")
        return existing, False

    async def take_over(
        self, claim: Claim, *, idempotency_key: str | None, payload_hash: str, amount: int | None = None
    ) -> Claim | None:
        """Claim again a released claim, or one whose owner vanished; None if someone else got it first.

        `amount` is what this attempt moves when it is not the claim's (an `upto` settlement asked again
        for another amount): the attempt's outcome is judged by it.

        Raises:
            IdempotencyConflictError: `idempotency_key` already names another claim.
        """
        now = _now()
        stale = sa.and_(claims_table.c.state == ClaimState.CLAIMED.value, claims_table.c.lease_until < now)
        statement = (
            claims_table.update()
            .where(
                claims_table.c.id == claim.id,
                claims_table.c.attempt == claim.attempt,
                sa.or_(claims_table.c.state == ClaimState.RELEASED.value, stale),
            )
            .values(
                state=ClaimState.CLAIMED.value,
                attempt=claim.attempt + 1,
                idempotency_key=idempotency_key,
                payload_hash=payload_hash,
                lease_until=now + self._lease,
                amount=claim.amount if amount is None else amount,
                **_NEW_ATTEMPT,
                updated_at=now,
            )
            .returning(*claims_table.c)
        )
        try:
            row = await write(self._engine, lambda connection: _first(connection, statement), isolated=True)
        except IntegrityError as exc:
            raise IdempotencyConflictError("this idempotency key was first used for another payment") from exc
        self._notify(claim.id)
        return _row(row) if row is not None else None

    async def mark_broadcast(
        self, claim_id: str, *, relayer: str, relayer_nonce: int, tx_hash: str, raw_tx: str
    ) -> None:
        """Record the transaction that carries the claimed authorization."""
        await self._update(
            claim_id,
            state=ClaimState.BROADCAST.value,
            relayer=relayer,
            relayer_nonce=relayer_nonce,
            tx_hash=tx_hash,
            raw_tx=raw_tx,
        )

    async def record_response(self, claim_id: str, response: dict[str, Any], **changes: Any) -> Claim:
        """Store the answer for an unfinished claim (with any state change) and return the claim as stored.

        A claim that already ended (succeeded, failed, released) keeps its answer: when two waiters race to
        record the outcome of one transaction, the first answer stands and the second gets it back.
        """
        if "state" in changes:
            changes["state"] = ClaimState(changes["state"]).value
        values = {"_id": claim_id, "updated_at": _now(), "response": response, **changes}
        stored = await write(self._engine, lambda connection: self._writes.record(connection, values))
        self._notify(claim_id)
        if stored is None:
            stored = await self.get(claim_id)
        if stored is None:
            raise LookupError(f"claim {claim_id} vanished")
        return stored

    async def wait_for(self, claim_id: str, done: Callable[[Claim], bool], timeout_s: float) -> Claim | None:
        """Wait until `done(claim)` holds (advanced here or by another process); None on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            event = self._changed.setdefault(claim_id, asyncio.Event())
            claim = await self.get(claim_id)
            if claim is not None and done(claim):
                return claim
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(remaining, self._poll_s))

    async def unfinished(self) -> list[Claim]:
        """Claims still `claimed` or `broadcast`: work in flight, or left behind by a crash."""
        statement = sa.select(claims_table).where(
            claims_table.c.state.in_([ClaimState.CLAIMED.value, ClaimState.BROADCAST.value])
        )
        async with self._engine.connect() as connection:
            return [_row(r) for r in (await connection.execute(statement)).all()]

    async def unfinished_counts(self) -> dict[ClaimState, int]:
        """How many claims are `claimed` (nothing sent yet) and `broadcast` (sent, not yet final)."""
        states = [ClaimState.CLAIMED, ClaimState.BROADCAST]
        statement = (
            sa.select(claims_table.c.state, sa.func.count())
            .where(claims_table.c.state.in_([state.value for state in states]))
            .group_by(claims_table.c.state)
        )
        async with self._engine.connect() as connection:
            counts = {ClaimState(state): int(n) for state, n in (await connection.execute(statement)).all()}
        return {state: counts.get(state, 0) for state in states}

    @property
    def engine(self) -> AsyncEngine:
        """The database holding the claims."""
        return self._engine

    async def succeeded_since(self, block_number: int) -> list[Claim]:
        """Succeeded claims mined at or after `block_number` (still within reach of a reorg)."""
        statement = sa.select(claims_table).where(
            claims_table.c.state == ClaimState.SUCCEEDED.value, claims_table.c.block_number >= block_number
        )
        async with self._engine.connect() as connection:
            return [_row(r) for r in (await connection.execute(statement)).all()]

    async def release(self, claim_id: str) -> None:
        """Give up an abandoned `claimed` claim that never broadcast, so a retry may take it."""
        statement = (
            claims_table.update()
            .where(claims_table.c.id == claim_id, claims_table.c.state == ClaimState.CLAIMED.value)
            .values(state=ClaimState.RELEASED.value, updated_at=_now())
        )
        await write(self._engine, lambda connection: connection.execute(statement))
        self._notify(claim_id)

    async def get(self, claim_id: str) -> Claim | None:
        """The claim with this id."""
        return await self._one(claims_table.c.id == claim_id)

    async def by_key(self, key: ClaimKey) -> Claim | None:
        """The claim for this authorization."""
        return await self._one(
            claims_table.c.chain_id == key.chain_id,
            claims_table.c.asset == key.asset,
            claims_table.c.payer == key.payer,
            claims_table.c.nonce == key.nonce,
        )

    async def by_idempotency_key(self, idempotency_key: str) -> Claim | None:
        """The claim first made with this idempotency key."""
        return await self._one(claims_table.c.idempotency_key == idempotency_key)

    async def find(self, key: ClaimKey, idempotency_key: str | None) -> Claim | None:
        """The claim for this authorization, or failing that the one first made with `idempotency_key`."""
        existing = await self.by_key(key)
        if existing is None and idempotency_key is not None:
            existing = await self.by_idempotency_key(idempotency_key)
        return existing

    async def _one(self, *conditions: sa.ColumnElement[bool]) -> Claim | None:
        async with self._engine.connect() as connection:
            row = (await connection.execute(sa.select(claims_table).where(*conditions))).first()
        return _row(row) if row is not None else None

    async def _update(self, claim_id: str, **values: Any) -> None:
        parameters = {"_id": claim_id, "updated_at": _now(), **values}
        await write(self._engine, lambda connection: connection.execute(_UPDATE, parameters))
        self._notify(claim_id)

    def _notify(self, claim_id: str) -> None:
        event = self._changed.pop(claim_id, None)
        if event is not None:
            event.set()
