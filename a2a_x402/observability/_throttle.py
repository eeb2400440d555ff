"""How many wrong credentials a client may present: a sliding window per (key, client network), in memory.

Every surface that takes a credential counts its refusals here: the merchant's dashboard log-in form and
bearer tokens on the dashboard and billing API (keyed by tenant), the callers' credentials on the A2A
routes, the facilitator's API keys. After `max_failures` wrong ones within `window_s`, a wrong one is
answered 429 (with `Retry-After`) until the oldest leaves the window. The credential is checked first and
only a wrong one is refused: the right credential still works from a throttled address, so an attacker
sharing an address (a NAT, a proxy) cannot lock its owner out. Guessing is then bounded by the
credential's entropy, not by the throttle (keys and tokens are long random strings; the throttle makes a
guesser's work slow to report, noisy and visible in 429s). A good credential clears nothing: the count is
of what was refused.

A client is counted by its network (`client_network`): an IPv4 address, or the /64 of an IPv6 one, since
whoever has one IPv6 address usually has its whole /64 to rotate through. Each process counts for itself
(replicas do not share counts), and the address is the connection's peer (behind a proxy, the proxy's,
unless the server is told to trust its forwarded address). At most `max_addresses` (key, network) pairs are
remembered; past that the least recently refused one is forgotten, so a flood cannot grow the table
without bound.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

__all__ = ["FailureThrottle", "client_network"]

_MAX_FAILURES = 10
_WINDOW_S = 300.0
_MAX_ADDRESSES = 10_000
_IPV6_PREFIX = 64


def client_network(host: str) -> str:
    """Whom a client address counts as: an IPv4 address as is (an IPv4-mapped IPv6 one too), an IPv6
    address as its /64 (`2001:db8:1:2::/64`); anything that is not an IP address (a test client's name, a
    Unix socket) unchanged."""
    try:
        address = ipaddress.ip_address(host.strip("[]").partition("%")[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, _IPV6_PREFIX), strict=False))
    return str(address)


@dataclass(slots=True)
class FailureThrottle:
    """Wrong credentials per (key, client network) over the last `window_s` seconds (monotonic time)."""

    max_failures: int = _MAX_FAILURES
    window_s: float = _WINDOW_S
    max_addresses: int = _MAX_ADDRESSES
    _failures: OrderedDict[tuple[str, str], deque[float]] = field(
        default_factory=OrderedDict, init=False, repr=False
    )

    def failed(self, key: str, address: str, *, now: float | None = None) -> int | None:
        """Count one wrong credential for `key` from `address`: the whole seconds (at least 1) to answer
        in `Retry-After` when the address had too many already (answer 429), else None (answer the
        surface's own refusal)."""
        wait = self.retry_after(key, address, now=now)
        self.refused(key, address, now=now)
        return None if wait is None else max(1, math.ceil(wait))

    def retry_after(self, key: str, address: str, *, now: float | None = None) -> float | None:
        """Seconds until a wrong credential for `key` from `address` is answered with the surface's own
        refusal again rather than 429, or None if it is now."""
        now = time.monotonic() if now is None else now
        failures = self._recent((key, client_network(address)), now)
        if failures is None or len(failures) < self.max_failures:
            return None
        return failures[0] + self.window_s - now

    def refused(self, key: str, address: str, *, now: float | None = None) -> None:
        """Count one wrong credential for `key` from `address`."""
        now = time.monotonic() if now is None else now
        counted = (key, client_network(address))
        failures = self._recent(counted, now)
        if failures is None:
            failures = self._failures[counted] = deque(maxlen=self.max_failures)
            while len(self._failures) > self.max_addresses:
                self._failures.popitem(last=False)
        failures.append(now)
        self._failures.move_to_end(counted)

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
