"""What the ledger is told (a `SettlementBooking`) and what it answers (entries, balances, statement lines).

Also the facts it publishes to its event sink, inside the transaction that records them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Protocol

from eth_utils.address import is_hex_address, to_checksum_address
from sqlalchemy.ext.asyncio import AsyncConnection

from ._errors import InvalidBookingError

__all__ = [
    "Ap2References",
    "Balance",
    "BookedEntry",
    "DailyRevenue",
    "EntryKind",
    "EntryStatus",
    "Finalization",
    "LedgerEventSink",
    "LedgerFact",
    "PayerTotal",
    "SettlementBooked",
    "SettlementBooking",
    "SettlementFinalized",
    "SettlementRecord",
    "SettlementReversed",
    "StatementLine",
    "utc",
]

_HASH32 = re.compile(r"^0x[0-9a-fA-F]{64}$")
# A payment's nonce as `facilitator.wire.signer_of` keys it: EIP-3009's `0x…`, or a Permit2 nonce's `p2…`.
_NONCE = re.compile(r"^(0x|p2)[0-9a-fA-F]{64}$")
_AP2_REFERENCE = re.compile(r"^[A-Za-z0-9_-]{43}$")
_CAIP2 = re.compile(r"^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$")
_UINT256_LIMIT = 2**256
_TEXT_MAX = 255


class EntryKind(StrEnum):
    """What a journal entry records."""

    SETTLEMENT = "settlement"
    REVERSAL = "reversal"


class EntryStatus(StrEnum):
    """Where a settlement stands, derived from the immutable facts recorded about it.

    `settled` once booked, `finalized` when its confirmation depth is reached, `reversed` when a reorg took
    its transaction off the chain (whether or not it had been finalized).
    """

    SETTLED = "settled"
    FINALIZED = "finalized"
    REVERSED = "reversed"


def utc(value: datetime, name: str = "time") -> datetime:
    """`value` as an aware UTC datetime; naive datetimes are refused, not guessed.

    Raises:
        InvalidBookingError: `value` has no time zone, or is outside the years 1 to 9999 in UTC.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidBookingError(f"{name}: must be timezone-aware (UTC), got naive {value.isoformat()}")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59-23:59 is year 10000 in UTC
        raise InvalidBookingError(f"{name}: out of range in UTC, got {value.isoformat()}") from None


def _address(name: str, value: str) -> str:
    checksummed = _checksummed(value) if isinstance(value, str) else None
    if checksummed is None:
        raise InvalidBookingError(f"{name}: must be a 0x-prefixed 20-byte hex address, got {value!r}")
    return checksummed


@functools.lru_cache(maxsize=4096)
def _checksummed(value: str) -> str | None:
    """`value` in EIP-55 form, None if it is no address. A booking's payee and asset repeat on every
    booking, and the checksum's keccak was most of a booking record's construction."""
    return to_checksum_address(value) if is_hex_address(value) else None


def _hash32(name: str, value: str) -> str:
    if not isinstance(value, str) or not _HASH32.fullmatch(value):
        raise InvalidBookingError(f"{name}: must be 0x followed by 64 hex digits, got {value!r}")
    return value.lower()


def _nonce(value: str) -> str:
    if not isinstance(value, str) or not _NONCE.fullmatch(value):
        raise InvalidBookingError(
            f"nonce: must be 0x (EIP-3009) or p2 (Permit2) followed by 64 hex digits, got {value!r}"
        )
    return value.lower()


def _text(name: str, value: str, *, allow_empty: bool = False) -> None:
    if not isinstance(value, str) or len(value) > _TEXT_MAX or (not value and not allow_empty):
        kind = "string" if allow_empty else "non-empty string"
        raise InvalidBookingError(
            f"{name}: must be a {kind} of at most {_TEXT_MAX} characters, got {value!r}"
        )


def _whole(name: str, value: int, *, minimum: int, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < limit:
        raise InvalidBookingError(f"{name}: must be an integer in [{minimum}, {limit}), got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Ap2References:
    """What names a payment made with AP2 mandates (specification §20), each the unpadded base64url of a
    SHA-256 (43 characters). None of them is a credential: they name the mandates, which are kept apart.

    Attributes:
        checkout_hash: the hash of the round's checkout JWT (the payment mandate's `transaction_id`).
        payment_ref: the closed payment mandate's reference (the payment receipt's `reference`).
        open_mandate: the key of the open payment mandate the payment counted against (the hash of its
            issuer-signed JWT).

    Raises:
        InvalidBookingError: a reference is not 43 base64url characters.
    """

    checkout_hash: str
    payment_ref: str
    open_mandate: str

    def __post_init__(self) -> None:
        for name in ("checkout_hash", "payment_ref", "open_mandate"):
            value = getattr(self, name)
            if not isinstance(value, str) or not _AP2_REFERENCE.fullmatch(value):
                raise InvalidBookingError(f"ap2.{name}: must be 43 base64url characters (a SHA-256)")


@dataclass(frozen=True, slots=True, kw_only=True)
class SettlementBooking:
    """One settled payment to book: who paid which tenant how much, and where it is on chain.

    Construction validates and normalizes: addresses to EIP-55, the nonce (an EIP-3009 one, `0x…`, or a
    Permit2 one, `p2…`: `facilitator.wire.signer_of`) and transaction hash to lowercase hex, `settled_at`
    to UTC. `amount` is in the asset's atomic units (an `int`, never a float). `network`
    is the CAIP-2 id; for `eip155` networks its reference must equal `chain_id`. `maximum` is a metered
    (x402 `upto`) payment's, the most the payer signed for (at least `amount`); None for a fixed price.
    `ap2` names the AP2 mandates a payment was made with (§20); None for a payment without them.

    Raises:
        InvalidBookingError: a field is malformed (the message names it).
    """

    tenant: str
    task_id: str
    context_id: str
    payer: str
    pay_to: str
    asset: str
    network: str
    chain_id: int
    amount: int
    nonce: str
    tx_hash: str
    block_number: int
    settled_at: datetime
    maximum: int | None = None
    ap2: Ap2References | None = None

    def __post_init__(self) -> None:
        if self.ap2 is not None and not isinstance(self.ap2, Ap2References):
            raise InvalidBookingError("ap2: must be Ap2References or None")
        _text("tenant", self.tenant, allow_empty=True)
        _text("task_id", self.task_id)
        _text("context_id", self.context_id)
        _whole("chain_id", self.chain_id, minimum=1, limit=2**63)
        _whole("amount", self.amount, minimum=1, limit=_UINT256_LIMIT)
        if self.maximum is not None:
            _whole("maximum", self.maximum, minimum=self.amount, limit=_UINT256_LIMIT)
        _whole("block_number", self.block_number, minimum=0, limit=2**63)
        if not isinstance(self.network, str) or not _CAIP2.fullmatch(self.network):
            raise InvalidBookingError(
                f"network: must be a CAIP-2 id such as eip155:8453, got {self.network!r}"
            )
        namespace, reference = self.network.split(":", 1)
        if namespace == "eip155" and reference != str(self.chain_id):
            raise InvalidBookingError(f"network: {self.network} is not chain {self.chain_id}")
        normalized = {
            "payer": _address("payer", self.payer),
            "pay_to": _address("pay_to", self.pay_to),
            "asset": _address("asset", self.asset),
            "nonce": _nonce(self.nonce),
            "tx_hash": _hash32("tx_hash", self.tx_hash),
            "settled_at": utc(self.settled_at, "settled_at"),
        }
        for name, value in normalized.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True, slots=True, kw_only=True)
class BookedEntry:
    """A journal entry as stored, with the current status of the settlement it concerns.

    For a reversal, the details are those of the reversed settlement, `reverses_entry_id` names it, and
    `status` is always `reversed`. `maximum` is a metered payment's (`SettlementBooking.maximum`), and the
    `ap2_` fields are the references of a payment made with AP2 mandates (`SettlementBooking.ap2`, a
    reversal repeating its settlement's), all None for any other.
    """

    id: str
    sequence: int
    kind: EntryKind
    status: EntryStatus
    tenant: str
    task_id: str
    context_id: str
    payer: str
    pay_to: str
    asset: str
    network: str
    chain_id: int
    nonce: str
    amount: int
    tx_hash: str
    block_number: int
    effective_at: datetime
    booked_at: datetime
    reverses_entry_id: str | None = None
    reason: str | None = None
    maximum: int | None = None
    ap2_checkout_hash: str | None = None
    ap2_payment_ref: str | None = None
    ap2_open_mandate: str | None = None

    @property
    def ap2(self) -> Ap2References | None:
        """The AP2 references of the payment, or None when it was made without mandates."""
        if self.ap2_checkout_hash is None or self.ap2_payment_ref is None or self.ap2_open_mandate is None:
            return None
        return Ap2References(
            checkout_hash=self.ap2_checkout_hash,
            payment_ref=self.ap2_payment_ref,
            open_mandate=self.ap2_open_mandate,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Finalization:
    """The fact that settlement `entry_id` reached `confirmations` blocks of depth."""

    id: str
    entry_id: str
    sequence: int
    confirmations: int
    finalized_at: datetime
    recorded_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Balance:
    """A tenant's revenue on one network and asset, in atomic units: `credits - debits`."""

    tenant: str
    network: str
    asset: str
    account_id: str
    balance: int
    credits: int
    debits: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SettlementRecord:
    """A settlement entry with every fact recorded about it since: its finalization and its reversal."""

    entry: BookedEntry
    finalization: Finalization | None = None
    reversal: BookedEntry | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DailyRevenue:
    """What one UTC day's bookings moved on a tenant's revenue account (atomic units): settlements booked
    that day (`credits`) and reversals booked that day (`debits`)."""

    day: date
    network: str
    asset: str
    credits: int
    debits: int

    @property
    def net(self) -> int:
        """The day's booked revenue: `credits - debits` (negative when reversals outweigh settlements)."""
        return self.credits - self.debits


@dataclass(frozen=True, slots=True, kw_only=True)
class PayerTotal:
    """What one payer paid a tenant in one asset: the settlements that stand (not reversed), their sum
    in atomic units, and when the last was booked."""

    payer: str
    network: str
    asset: str
    count: int
    total: int
    last_seen: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class StatementLine:
    """One movement of a tenant's revenue account, in booking order.

    `direction` is `credit` (a settlement: revenue up) or `debit` (a reversal: revenue down);
    `balance_after` is the revenue account's balance right after this line; `status` is the current status
    of the settlement the line concerns; `ap2` the AP2 references of a payment made with mandates.
    """

    sequence: int
    entry_id: str
    kind: EntryKind
    status: EntryStatus
    booked_at: datetime
    effective_at: datetime
    task_id: str
    context_id: str
    payer: str
    pay_to: str
    network: str
    asset: str
    direction: str
    amount: int
    balance_after: int
    tx_hash: str
    block_number: int
    reverses_entry_id: str | None
    ap2: Ap2References | None = None


@dataclass(frozen=True, slots=True)
class SettlementBooked:
    """A settlement was booked (a new entry)."""

    entry: BookedEntry

    @property
    def sequence(self) -> int:
        """The ledger sequence number of this fact."""
        return self.entry.sequence

    @property
    def tenant(self) -> str:
        """The tenant the fact belongs to."""
        return self.entry.tenant


@dataclass(frozen=True, slots=True)
class SettlementFinalized:
    """A booked settlement reached its confirmation depth."""

    entry: BookedEntry
    finalization: Finalization

    @property
    def sequence(self) -> int:
        """The ledger sequence number of this fact."""
        return self.finalization.sequence

    @property
    def tenant(self) -> str:
        """The tenant the fact belongs to."""
        return self.entry.tenant


@dataclass(frozen=True, slots=True)
class SettlementReversed:
    """A booked settlement was reversed by the new entry `reversal`."""

    original: BookedEntry
    reversal: BookedEntry

    @property
    def sequence(self) -> int:
        """The ledger sequence number of this fact."""
        return self.reversal.sequence

    @property
    def tenant(self) -> str:
        """The tenant the fact belongs to."""
        return self.original.tenant


LedgerFact = SettlementBooked | SettlementFinalized | SettlementReversed
"""Everything the ledger publishes."""


class LedgerEventSink(Protocol):
    """Where the ledger publishes its facts: the webhook outbox.

    `publish` runs on the ledger's own connection, inside the transaction that records the fact, so the
    fact and its events commit or roll back together. It must not commit, and should only write.
    """

    async def publish(self, connection: AsyncConnection, fact: LedgerFact) -> None:
        """Record the events for `fact` on `connection` (no commit)."""
