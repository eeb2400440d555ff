"""The CPU budget of issue 15's node-share target: can 75 % of the node ceiling be reached on these cores?

Settling at a rate R costs R × (anvil's + the server's + the load generator's CPU per settlement) of CPU
per second, and the machine has `cores` seconds of it. At 75 % of the one-connection ceiling C, everything
together may therefore spend at most cores × 1000 / (0.75 × C) ms of CPU per settlement; what anvil and
the load generator spend per settlement (measured in the same segment) leaves the rest for the server,
which is one Python process and so can never use more than 1000 / (0.75 × C) ms of one core either. The
server's measured figure stands beside that remainder, and so does the floor of our HTTP stack (uvicorn
and Starlette answering a trivial POST of the same body at the same concurrency, ``bench._http_floor_app``):
a settle path that costs less than its HTTP serving cannot exist on this stack.

Figures are per repetition, then the median (min–max) over repetitions, as in the rest of the summary.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._segments import HTTP_FLOOR, NODE, OURS, Segment

__all__ = ["Budget", "budgets", "render_budget"]


@dataclass(frozen=True, slots=True)
class Budget:
    """One repetition's CPU budget per settlement at the target share of the node ceiling (ms)."""

    cores: int
    share: float
    ceiling_per_s: float
    anvil_ms: float
    loadgen_ms: float
    server_ms: float
    anvil_ceiling_ms: float | None = None
    floor_ms: float | None = None
    machine_ms: float | None = None
    anvil_thread_ms: float | None = None
    server_thread_ms: float | None = None
    server_system_ms: float | None = None

    @property
    def allowed_ms(self) -> float:
        """CPU per settlement the machine's cores allow everything at `share` of the ceiling."""
        return self.cores * 1000 / (self.share * self.ceiling_per_s)

    @property
    def one_core_ms(self) -> float:
        """CPU per settlement one process (the server, one event loop) can spend at that rate."""
        return 1000 / (self.share * self.ceiling_per_s)

    @property
    def left_ms(self) -> float:
        """What anvil and the load generator leave of `allowed_ms` for the server."""
        return self.allowed_ms - self.anvil_ms - self.loadgen_ms

    @property
    def server_bound_ms(self) -> float:
        """The most the server may spend: what is left, and never more than one core's share."""
        return min(self.left_ms, self.one_core_ms)

    @property
    def others_ms(self) -> float | None:
        """Busy CPU per settlement of everything else on the machine (other work, the kernel's)."""
        if self.machine_ms is None:
            return None
        return self.machine_ms - self.anvil_ms - self.loadgen_ms - self.server_ms

    def verdict(self) -> str:
        """Whether the target fits these cores at the measured costs, and if not, what is short."""
        if self.server_ms <= self.server_bound_ms:
            return "fits: the measured costs allow the target on these cores"
        if self.floor_ms is not None and self.floor_ms > self.server_bound_ms:
            return (
                f"out of reach: the HTTP floor alone ({self.floor_ms:.2f} ms) is over the "
                f"{self.server_bound_ms:.2f} ms left for the server"
            )
        if self.server_bound_ms <= 0:
            return "out of reach: anvil and the load generator alone use the whole budget"
        return (
            f"needs the server at ≤ {self.server_bound_ms:.2f} ms per settlement "
            f"({self.server_bound_ms / self.server_ms:.0%} of its measured {self.server_ms:.2f} ms)"
        )

    def thread_caps(self) -> str:
        """The rates the busiest threads of anvil and the server allow, each if its work is serial."""
        caps = []
        for name, busiest in (("anvil's", self.anvil_thread_ms), ("the server's", self.server_thread_ms)):
            if busiest:
                rate = 1000 / busiest
                caps.append(f"{name} {rate:,.0f}/s ({rate / self.ceiling_per_s:.0%} of the ceiling)")
        if not caps:
            return ""
        return "busiest threads, if their work is serial, cap settlements at " + " and ".join(caps)


def _one(run: Sequence[Segment], server: str, mode: str, concurrency: int) -> Segment | None:
    return next((s for s in run if (s.server, s.mode, s.concurrency) == (server, mode, concurrency)), None)


def budgets(runs: Sequence[Sequence[Segment]], *, concurrency: int, cores: int, share: float) -> list[Budget]:
    """The budget of each repetition that measured the ceiling and our settlements with their CPU."""
    found = []
    for run in runs:
        node = _one(run, NODE, "raw", 1)
        ours = _one(run, OURS, "settle", concurrency)
        floor = _one(run, HTTP_FLOOR, "floor", concurrency)
        if node is None or ours is None or node.rate <= 0:
            continue
        if ours.anvil_cpu_ms is None or ours.server_cpu_ms is None or ours.loadgen_cpu_ms is None:
            continue
        found.append(
            Budget(
                cores=cores,
                share=share,
                ceiling_per_s=node.rate,
                anvil_ms=ours.anvil_cpu_ms,
                loadgen_ms=ours.loadgen_cpu_ms,
                server_ms=ours.server_cpu_ms,
                anvil_ceiling_ms=node.anvil_cpu_ms,
                floor_ms=floor.server_cpu_ms if floor is not None else None,
                machine_ms=ours.machine_cpu_ms,
                anvil_thread_ms=ours.anvil_thread_ms,
                server_thread_ms=ours.server_thread_ms,
                server_system_ms=ours.server_system_ms,
            )
        )
    return found


def _spread(found: Sequence[Budget], value: Callable[[Budget], float | None], digits: int = 2) -> str:
    values = [v for v in (value(b) for b in found) if v is not None]
    if not values:
        return "n/a"
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:,.{digits}f}"
    return f"{middle:,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def render_budget(found: Sequence[Budget], *, concurrency: int) -> list[str]:
    """The budget as Markdown lines: a table of CPU ms per settlement and the verdict per repetition."""
    if not found:
        return []
    first = found[0]
    share = f"{first.share:.0%}"
    at = f"{first.share:g} × ceiling"
    rows: list[tuple[str, Callable[[Budget], float | None]]] = [
        (f"allowed for everything at {share} of the ceiling: cores × 1000 / ({at})", lambda b: b.allowed_ms),
        (f"anvil, in our settle segment at c={concurrency}", lambda b: b.anvil_ms),
        ("of which its busiest thread", lambda b: b.anvil_thread_ms),
        ("anvil per raw transaction, in the ceiling segment", lambda b: b.anvil_ceiling_ms),
        ("load generator (HTTP client only: payments are signed before timing)", lambda b: b.loadgen_ms),
        ("left for the server (allowed − anvil − load generator)", lambda b: b.left_ms),
        (f"one process's bound at that rate (one core: 1000 / ({at}))", lambda b: b.one_core_ms),
        (f"**server, measured** (settle c={concurrency})", lambda b: b.server_ms),
        ("of which its busiest thread (the event loop)", lambda b: b.server_thread_ms),
        ("of which system time (the kernel's, its sockets' included)", lambda b: b.server_system_ms),
        (f"HTTP floor: uvicorn + Starlette, trivial POST, same body, c={concurrency}", lambda b: b.floor_ms),
        ("everything else busy on the machine meanwhile (other work, the kernel)", lambda b: b.others_ms),
    ]
    lines = [
        f"CPU budget per settlement at {share} of the node ceiling ({first.cores} cores; ceiling "
        f"{_spread(found, lambda b: b.ceiling_per_s, 0)} raw tx/s), ms of CPU per settlement:",
        "",
        "| part | ms per settlement |",
        "|---|---|",
        *(f"| {title} | {_spread(found, value)} |" for title, value in rows),
        "",
    ]
    for index, budget in enumerate(found):
        caps = budget.thread_caps()
        lines.append(f"- rep {index + 1}: {budget.verdict()}" + (f"; {caps}" if caps else ""))
    return lines
