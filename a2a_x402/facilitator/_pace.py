"""How fast the node answers, measured per request, and so how many calls may be in flight at once.

A node that works through calls one after another (ganache, a busy single-threaded dev node) takes a
batch's time in proportion to its calls, and a request queued behind others waits for theirs too: fifty
concurrent settles' reads sent as one batch of two hundred calls can outlast the RPC timeout while every
call alone would take milliseconds. So each request's time per call in flight is measured, and the calls
sent at once are held to what the node answers in a quarter of the timeout; what does not fit waits its
turn here, where no timeout runs. A fast node (anvil, a provider answering in parallel) measures a
fraction of a millisecond per call and is never held below the batch limit.
"""

from __future__ import annotations

__all__ = ["NodePace"]

# A request is sized to take at most this share of the RPC timeout at the measured pace.
_BUDGET_SHARE = 0.25
# Requests with fewer calls in flight are dominated by the round trip, which says nothing about the cost of
# one more call: only a timeout among them is counted. So many calls are always let through at once: a
# node hanging on one call (a timeout's sample) must not hold back every other.
_SAMPLE_MIN_CALLS = 16
# A node gets at most this many calls at once until it answered more in time (then twice that many).
_COLD_LIMIT = 32
# Each new sample weighs this much against the ones before (older ones fade, so a node that recovers is
# soon given full batches again).
_WEIGHT = 0.3


class NodePace:
    """The node's measured seconds per call in flight, and the calls in flight that keeps a request within
    its share of the timeout (`limit`)."""

    def __init__(self, timeout_s: float, most: int):
        self._budget_s = timeout_s * _BUDGET_SHARE
        self._most = most
        self._seconds = 0.0  # faded sums of the samples' durations and of their calls in flight
        self._calls = 0.0
        self._proven = 0  # the most calls in flight that a request was answered within its share with

    def measured(self, in_flight: int, elapsed_s: float, *, timed_out: bool) -> None:
        """Count a request that took `elapsed_s` (or timed out then) with `in_flight` calls under way,
        its own included."""
        if not timed_out and elapsed_s <= self._budget_s:
            self._proven = max(self._proven, in_flight)
        if in_flight < _SAMPLE_MIN_CALLS and not timed_out:
            return
        self._seconds = self._seconds * (1 - _WEIGHT) + elapsed_s
        self._calls = self._calls * (1 - _WEIGHT) + in_flight

    def limit(self) -> int:
        """How many calls may be in flight at once (and so in one request): what fits the measured pace,
        and at most twice what the node has been seen to answer in time (a pace measured on a few light
        calls must not send a burst of a thousand heavy ones at once)."""
        grown = min(max(_COLD_LIMIT, 2 * self._proven), self._most)
        if self._calls == 0:
            return grown
        fit = int(self._budget_s * self._calls / self._seconds) if self._seconds > 0 else self._most
        return max(_SAMPLE_MIN_CALLS, min(fit, grown))
