"""When a failed webhook delivery is tried again: the schedule and its jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["RETRY_SCHEDULE_S", "RetryPolicy"]

RETRY_SCHEDULE_S: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
"""Delays between attempts after each failure: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h.

With the immediate first attempt that is 10 attempts over about 75.6 hours, a little over three days
(the Standard Webhooks example schedule)."""

_random = random.SystemRandom()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When to try again: `delays_s[k]` after the (k+1)-th failure of a round, scaled by a random factor
    in [1 - jitter_ratio, 1 + jitter_ratio] so that endpoints recovering from an outage are not hit by
    every retry at once."""

    delays_s: tuple[float, ...] = RETRY_SCHEDULE_S
    jitter_ratio: float = 0.1

    def delay_after(self, failures: int, retry_after_s: float | None = None) -> float | None:
        """Seconds to wait after the `failures`-th failure of a round, or None when it is the last.

        A `Retry-After` longer than the scheduled delay is honoured, up to the longest scheduled delay.
        """
        if failures > len(self.delays_s):
            return None
        delay = self.delays_s[failures - 1] * (1 + self.jitter_ratio * _random.uniform(-1.0, 1.0))
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, max(self.delays_s)))
        return delay
