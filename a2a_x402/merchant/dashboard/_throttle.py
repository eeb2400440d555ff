"""How many wrong credentials a client address may present for a tenant: a sliding window, in memory.

One count per (tenant, client address) covers every surface that takes the tenant's API token: the
dashboard's log-in form, a bearer token on the dashboard and on the billing API. After `max_failures`
wrong ones within `window_s`, a wrong one is answered 429 until the oldest leaves the window. The
credential is checked first and only a wrong one is refused: the right token (or an open session) still
works from a throttled address, so an attacker sharing an address (a NAT, a proxy) cannot lock the tenant
out. Guessing is then bounded by the token's entropy, not by the throttle (tokens are long random strings;
the throttle makes a guesser's work slow to report, noisy and visible in 429s). A good credential clears
nothing: the count is of what was refused. Each merchant process counts for itself (replicas do not
share counts), and the address is the connection's peer (behind a proxy, the proxy's, unless the server
is told to trust its forwarded address). At most `max_addresses` (tenant, address) pairs are remembered;
past that the least recently refused one is forgotten, so a flood cannot grow the table without bound.
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
    """Wrong credentials per (tenant, client address) over the last `window_s` seconds (monotonic time)."""

    max_failures: int = _MAX_FAILURES
    window_s: float = _WINDOW_S
    max_addresses: int = _MAX_ADDRESSES
    _failures: OrderedDict[tuple[str, str], deque[float]] = field(
        default_factory=OrderedDict, init=False, repr=False
    )

    def retry_after(self, tenant: str, address: str, *, now: float | None = None) -> float | None:
        """Seconds until a wrong credential for `tenant` from `address` is answered 401 again rather
        than 429, or None if it is now."""
        now = time.monotonic() if now is None else now
        failures = self._recent((tenant, address), now)
        if failures is None or len(failures) < self.max_failures:
            return None
        return failures[0] + self.window_s - now

    def refused(self, tenant: str, address: str, *, now: float | None = None) -> None:
        """Count one wrong credential for `tenant` from `address`."""
        now = time.monotonic() if now is None else now
        key = (tenant, address)
        failures = self._recent(key, now)
        if failures is None:
            failures = self._failures[key] = deque(maxlen=self.max_failures)
            while len(self._failures) > self.max_addresses:
                self._failures.popitem(last=False)
        failures.append(now)
        self._failures.move_to_end(key)

    def _recent(self, key: tuple[str, str], now: float) -> deque[float] | None:
        """`key`'s failures still in the window (the older ones dropped), or None if it has none."""
        failures = self._failures.get(key)
        if failures is None:
            return None
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return None
        return failures
