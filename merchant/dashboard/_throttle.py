"""How many failed log-ins a client address may make: a sliding window per address, in memory.

After `max_failures` refused log-ins from one address within `window_s`, the log-in form refuses that
address (429) until the oldest of them leaves the window; while refused, a log-in is not tried at all, so
guessing tokens from one address is bounded to `max_failures` a window. A good log-in clears nothing: the
count is of what was refused. Each merchant process counts for itself (replicas do not share counts), and
the address is the connection's peer (behind a proxy, the proxy's, unless the server is told to trust its
forwarded address). At most `max_addresses` are remembered; past that the least recently refused one is
forgotten, so a flood of addresses cannot grow the table without bound.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

__all__ = ["LoginThrottle"]

_MAX_FAILURES = 10
_WINDOW_S = 300.0
_MAX_ADDRESSES = 10_000


@dataclass(slots=True)
class LoginThrottle:
    """Failed log-ins per client address over the last `window_s` seconds (monotonic time)."""

    max_failures: int = _MAX_FAILURES
    window_s: float = _WINDOW_S
    max_addresses: int = _MAX_ADDRESSES
    _failures: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict, init=False, repr=False)

    def retry_after(self, address: str, *, now: float | None = None) -> float | None:
        """Seconds until `address` may try to log in again, or None if it may now."""
        now = time.monotonic() if now is None else now
        failures = self._recent(address, now)
        if failures is None or len(failures) < self.max_failures:
            return None
        return failures[0] + self.window_s - now

    def refused(self, address: str, *, now: float | None = None) -> None:
        """Count one refused log-in from `address`."""
        now = time.monotonic() if now is None else now
        failures = self._recent(address, now)
        if failures is None:
            failures = self._failures[address] = deque(maxlen=self.max_failures)
            while len(self._failures) > self.max_addresses:
                self._failures.popitem(last=False)
        failures.append(now)
        self._failures.move_to_end(address)

    def _recent(self, address: str, now: float) -> deque[float] | None:
        """`address`'s failures still in the window (the older ones dropped), or None if it has none."""
        failures = self._failures.get(address)
        if failures is None:
            return None
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        if not failures:
            del self._failures[address]
            return None
        return failures
