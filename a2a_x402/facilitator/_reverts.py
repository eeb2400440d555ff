"""Settlements that reverted on chain, remembered in the shared database so no wallet makes us pay twice.

A reverted settlement cost the relayer gas and moved nothing. Verification simulates with the fees the
real transaction carries, but a wallet can still answer differently on chain than in any simulation (it
reads the block, the caller, storage a front-runner changes). So each reverted settlement is recorded
(its payer, the payer's code hash, the relayer that sent it and the wei it burned), and:

- its payer is refused for `cooloff_s` before anything is claimed or sent (a fresh authorization or task
  changes nothing: the payer is the same);
- its wallet code is refused as well once `code_payers` different payers with that code reverted within
  the cool-off: a wallet deployed anew per attempt shares its code with the others, while one bad wallet
  of a popular kind (every Safe proxy has the same code) cannot lock out all its honest peers;
- each relayer key spends at most `budget_wei` on reverts per hour: past it the key sends nothing new and
  settles are refused until the hour's oldest reverts age out.

Rows are kept in the database so replicas share them and a restart forgets nothing. Both judgements read
a copy of the recent rows refreshed at most every `_REFRESH_S`, to which this process adds its own reverts
at once: a verification or a settle costs no database read, and a replica's revert counts here within
seconds (a key is used by one process at a time, so its budget is that process's to keep).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from eth_utils.crypto import keccak
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import Uint256, UtcDateTime, write

from ._errors import PaymentInvalidError
from .wire import Reason

__all__ = [
    "CoolingOffError",
    "RevertBudgetSpentError",
    "RevertRefusalError",
    "BUDGET_WINDOW_S",
    "RevertGuard",
    "RevertedSettlement",
    "read_spent",
    "reverts_table",
    "wallet_code_hash",
]

logger = logging.getLogger(__name__)

BUDGET_WINDOW_S = 3600
"""The window a relayer key's revert budget covers: its spending on reverts in the last hour."""

# How stale the cached budget spending may be before a settle reads it again.
_REFRESH_S = 10.0
# An EIP-7702 account's code is a delegation designator: shared by every account delegating to one
# implementation, it says nothing of this account, whose address is cooled off anyway.
_DELEGATION_PREFIX = "0xef0100"

metadata = sa.MetaData()

reverts_table = sa.Table(
    "settlement_reverts",
    metadata,
    sa.Column("tx_hash", sa.String(66), primary_key=True),
    sa.Column("chain_id", sa.BigInteger, nullable=False),
    sa.Column("relayer", sa.String(42), nullable=False),
    sa.Column("payer", sa.String(42), nullable=False),
    sa.Column("code_hash", sa.String(66), nullable=True),
    sa.Column("gas_wei", Uint256(), nullable=False),
    sa.Column("reverted_at", UtcDateTime(), nullable=False),
)


@dataclass(frozen=True, slots=True)
class RevertedSettlement:
    """One of our settlement transactions that reverted: who it was for, who sent it, what it cost."""

    tx_hash: str
    relayer: str
    payer: str
    code_hash: str | None
    gas_wei: int


def wallet_code_hash(code: object) -> str | None:
    """The keccak-256 of a payer's code (an `eth_getCode` reply), or None for an EOA or a 7702 delegation."""
    if not isinstance(code, str) or code in ("0x", "0x0", "") or code.startswith(_DELEGATION_PREFIX):
        return None
    return "0x" + keccak(hexstr=code).hex()


class RevertRefusalError(PaymentInvalidError):
    """A payment refused because of settlements that reverted on chain, not for anything of its own."""


class CoolingOffError(RevertRefusalError):
    """A payer, or its wallet's code, is cooling off after a settlement reverted on chain."""


class RevertBudgetSpentError(RevertRefusalError):
    """Every relayer key of this process spent its budget for reverted settlements."""


class RevertGuard:
    """Records reverted settlements and refuses what they make suspect. Safe for concurrent use."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        chain_id: int,
        cooloff_s: float,
        code_payers: int,
        budget_wei: int | None,
    ) -> None:
        self._engine = engine
        self._chain_id = chain_id
        self.cooloff_s = cooloff_s
        self._code_payers = code_payers
        self.budget_wei = budget_wei
        dialect_insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert
        self._insert = (
            dialect_insert(reverts_table).on_conflict_do_nothing().returning(reverts_table.c.tx_hash)
        )
        self._spent: dict[str, int] = {}  # relayer -> wei spent on reverts in the window, as last read
        self._read_at: float | None = None
        # The cool-off's reverts as last read: payer -> last revert; code hash -> payer -> last revert.
        self._payers: dict[str, datetime] = {}
        self._codes: dict[str, dict[str, datetime]] = {}
        self._recent_at: float | None = None
        self.refusals: Counter[str] = Counter()
        """Settles and verifications refused, by why: `payer`, `code` (cooling off) or `budget`."""
        self.revert_gas_wei: Counter[str] = Counter()
        """Wei this process saw spent on reverted settlements since it started, by relayer."""

    async def record(self, revert: RevertedSettlement) -> bool:
        """Remember a reverted settlement; False if it was recorded before (a second look at one receipt)."""
        at = datetime.now(UTC)
        row = {
            "tx_hash": revert.tx_hash,
            "chain_id": self._chain_id,
            "relayer": revert.relayer,
            "payer": revert.payer,
            "code_hash": revert.code_hash,
            "gas_wei": revert.gas_wei,
            "reverted_at": at,
        }

        def operation(connection: sa.Connection) -> bool:
            return connection.execute(self._insert, row).first() is not None

        if not await write(self._engine, operation):
            return False
        self.revert_gas_wei[revert.relayer] += revert.gas_wei
        self._remember(revert.payer, revert.code_hash, at)
        self._spent[revert.relayer] = self._spent.get(revert.relayer, 0) + revert.gas_wei
        cooled = f"payer {revert.payer}" + (f" and code {revert.code_hash}" if revert.code_hash else "")
        logger.warning(
            "settlement %s reverted on chain (%d wei of relayer %s's gas): %s cooling off for %g s",
            revert.tx_hash,
            revert.gas_wei,
            revert.relayer,
            cooled,
            self.cooloff_s,
        )
        return True

    async def check_cooling(self, payer: str, code_hash: str | None) -> None:
        """Refuse a payer, or a wallet code, whose settlements reverted within the cool-off.

        Judged on the reverts of the cool-off as last read (every `_REFRESH_S`, and this process's own at
        once), so a verification costs no database read: a replica's revert counts here within seconds.

        A database that cannot be read leaves the last copy standing (tried again after `_REFRESH_S`):
        verifying needs no database, and a settle fails at its claim anyway.

        Raises:
            CoolingOffError: the payer (or its code) is cooling off; says until when.
        """
        if self.cooloff_s <= 0:
            return
        await self._read_recent()
        since = datetime.now(UTC) - timedelta(seconds=self.cooloff_s)
        last = self._payers.get(payer)
        if last is not None and last > since:
            self._refuse("payer", f"settlements from {payer} reverted", last)
        if code_hash is None:
            return
        payers = [at for at in self._codes.get(code_hash, {}).values() if at > since]
        if len(payers) >= self._code_payers:
            what = f"settlements of {len(payers)} wallets with the code of {payer} reverted"
            self._refuse("code", what, max(payers))

    async def _read_recent(self) -> None:
        """Read the reverts of the cool-off again, if the last read is older than `_REFRESH_S`."""
        now = time.monotonic()
        if self._recent_at is not None and now - self._recent_at < _REFRESH_S:
            return
        self._recent_at = now
        since = datetime.now(UTC) - timedelta(seconds=self.cooloff_s)
        statement = sa.select(
            reverts_table.c.payer, reverts_table.c.code_hash, reverts_table.c.reverted_at
        ).where(reverts_table.c.chain_id == self._chain_id, reverts_table.c.reverted_at > since)
        try:
            async with self._engine.connect() as connection:
                rows = (await connection.execute(statement)).all()
        except SQLAlchemyError as exc:
            logger.warning("reverted settlements not read again (the last read stands): %s", exc)
            return
        self._payers, self._codes = {}, {}
        for payer, code_hash, reverted_at in rows:
            self._remember(payer, code_hash, reverted_at)

    def _remember(self, payer: str, code_hash: str | None, at: datetime) -> None:
        self._payers[payer] = max(at, self._payers.get(payer, at))
        if code_hash is not None:
            by_payer = self._codes.setdefault(code_hash, {})
            by_payer[payer] = max(at, by_payer.get(payer, at))

    def _refuse(self, why: str, what: str, last: datetime) -> None:
        until = last + timedelta(seconds=self.cooloff_s)
        self.refusals[why] += 1
        message = (
            f"{what} on chain: refused until {until.isoformat(timespec='seconds')} "
            "(its simulation cannot be trusted)"
        )
        logger.warning("refused: %s", message)
        raise CoolingOffError(Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED, message)

    def spent_out(self, relayer: str) -> bool:
        """Whether `relayer` has spent its revert budget for the window (as last read: see `refresh`)."""
        return self.budget_wei is not None and self._spent.get(relayer, 0) >= self.budget_wei

    def spent(self) -> dict[str, int]:
        """Wei each relayer spent on reverts in the budget window, as last read."""
        return dict(self._spent)

    async def refresh(self, relayers: Iterable[str], *, force: bool = False) -> None:
        """Read each relayer's spending in the window again, if the last read is older than `_REFRESH_S`."""
        now = time.monotonic()
        if not force and self._read_at is not None and now - self._read_at < _REFRESH_S:
            return
        self._spent, self._read_at = await read_spent(self._engine, self._chain_id, relayers), now

    async def current_spent(self, relayers: Iterable[str]) -> dict[str, int]:
        """Each relayer's spending on reverts in the window, as `spent_out` judges it: read again when
        stale (so a spent key's readiness comes back once its reverts age out), else as last read (a
        database that cannot be read is the database check's to report)."""
        try:
            await self.refresh(relayers)
        except SQLAlchemyError as exc:
            logger.debug("revert budget not read again: %s", exc)
        return self.spent()

    def refuse_if_spent_out(self, relayers: Iterable[str]) -> None:
        """Refuse a new settlement when every key of `relayers` (those this process holds) spent its budget.

        Raises:
            RevertBudgetSpentError: no held key has budget left.
        """
        held = list(relayers)
        if self.budget_wei is None or not held or not all(self.spent_out(address) for address in held):
            return
        self.refusals["budget"] += 1
        message = (
            f"the relayer spent its budget for reverted settlements ({self.budget_wei} wei per hour, "
            "X402_RELAYER_REVERT_BUDGET_WEI): no settlement is sent until older reverts age out"
        )
        logger.warning("refused: %s", message)
        raise RevertBudgetSpentError(Reason.UNEXPECTED_SETTLE_ERROR, message)


async def read_spent(engine: AsyncEngine, chain_id: int, relayers: Iterable[str]) -> dict[str, int]:
    """Wei each of `relayers` spent on reverted settlements in the last `BUDGET_WINDOW_S`, from the database.

    Raises:
        SQLAlchemyError: the database could not be read.
    """
    since = datetime.now(UTC) - timedelta(seconds=BUDGET_WINDOW_S)
    addresses = list(relayers)
    statement = sa.select(reverts_table.c.relayer, reverts_table.c.gas_wei).where(
        reverts_table.c.chain_id == chain_id,
        reverts_table.c.reverted_at > since,
        reverts_table.c.relayer.in_(addresses),
    )
    async with engine.connect() as connection:
        rows = (await connection.execute(statement)).all()
    spent = dict.fromkeys(addresses, 0)
    # Summed here: SQLite holds these as text, and a sum of uint256 may not fit the database's integers.
    for relayer, gas_wei in rows:
        spent[relayer] += int(gas_wei)
    return spent
