"""The `upto` maxima a policy authorized per UTC day, per network and asset, and the reservation that
counts one. Kept in memory by default (`UptoDays`): per policy object, so per process: a restart, or another
process paying with the same key, starts the day at nothing. A policy given a file counts in it instead
(`_budget_file.UptoDaysFile`): shared by every process naming it, and kept across restarts.

A maximum counts from the moment it is reserved, just before it is signed, whatever is settled of it later:
the merchant may take it all until the authorization expires. A reservation whose payment was never signed
is released. Reserving checks and counts under one lock, so concurrent tasks (threads or coroutines) cannot
both pass a cap that only one fits under.
"""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime
from typing import Protocol

__all__ = ["DayKey", "Reservation", "UptoDayCounts", "UptoDays", "today"]

DayKey = tuple[date, str, str]
"""A day's count: (UTC day, network, asset)."""


def today() -> date:
    """The current UTC day."""
    return datetime.now(UTC).date()


class UptoDayCounts(Protocol):
    """Where a policy counts its `upto` maxima."""

    scope: str
    """Whose counts these are, for a refusal's words ("by this process")."""

    def spent(self, network: str, asset: str) -> int:
        """What today's authorizations of `asset` on `network` add up to."""

    def reserve(self, network: str, asset: str, amount: int, cap: int | None) -> Reservation | int:
        """Count `amount` for today, or, when it would take the day over `cap`, return what is spent
        already (nothing counted)."""

    def take_back(self, key: DayKey, amount: int) -> None:
        """Uncount `amount` of the day and asset of `key` (a reservation released)."""


class Reservation:
    """One counted maximum; ``release`` takes it back (once) when nothing was signed."""

    def __init__(self, days: UptoDayCounts | None, key: DayKey, amount: int) -> None:
        self._days = days
        self._key = key
        self._amount = amount

    def release(self) -> None:
        """Take the amount back from its day (nothing for a reservation already released or of ``exact``)."""
        if self._days is not None:
            days, self._days = self._days, None
            days.take_back(self._key, self._amount)


NO_RESERVATION = Reservation(None, (date.min, "", ""), 0)
"""What an ``exact`` payment reserves: nothing."""


class UptoDays:
    """The sum of `upto` maxima authorized today (UTC) for each (network, asset), in memory."""

    scope = "by this process"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spent: dict[DayKey, int] = {}

    def spent(self, network: str, asset: str) -> int:
        """What today's authorizations of `asset` on `network` add up to."""
        with self._lock:
            return self._spent.get((today(), network, asset), 0)

    def reserve(self, network: str, asset: str, amount: int, cap: int | None) -> Reservation | int:
        """Count `amount` for today, or, when it would take the day over `cap`, return what is spent already
        (nothing counted)."""
        key = (today(), network, asset)
        with self._lock:
            spent = self._spent.get(key, 0)
            if cap is not None and spent + amount > cap:
                return spent
            # Only today's sums are kept: yesterday's can never be read again.
            self._spent = {k: v for k, v in self._spent.items() if k[0] == key[0]}
            self._spent[key] = spent + amount
        return Reservation(self, key, amount)

    def take_back(self, key: DayKey, amount: int) -> None:
        """Uncount `amount` of the day and asset of `key` (a reservation released)."""
        with self._lock:
            if key in self._spent:
                self._spent[key] = max(self._spent[key] - amount, 0)
