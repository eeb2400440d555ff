"""The merchant benchmark's summary: the targets table, per-segment details and correctness findings.

Each figure is the median over the repetitions with its min and max. A ratio or a margin is computed
within each repetition (paid and bare measured back to back on the same machine state) and its median
is shown, as the facilitator benchmark does.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import methodcaller

from ._merchant_flows import FlowKind, FlowSegment, percentile

__all__ = [
    "IN_MEMORY",
    "LATENCY_ALLOWANCE_MS",
    "P99_MAX_RATIO",
    "THROUGHPUT_MIN_RATIO",
    "Repetition",
    "render_report",
    "targets_met",
]

THROUGHPUT_MIN_RATIO = 0.65
"""Paid tasks per second at the high concurrency, at least this share of the bare flow's rate (issue 15)."""

P99_MAX_RATIO = 2.0
"""Paid p99 latency at the high concurrency, at most this multiple of the bare flow's."""

LATENCY_ALLOWANCE_MS = 10.0
"""One at a time, paid p50 at most bare p50 + two settlement round trips to the node (verify and settle)
+ this much for the payment layer's own work."""

IN_MEMORY = "memory"
"""The backend label of the bare flow with the SDK's in-memory task store (shown for context only)."""

PAID, BARE = FlowKind.PAID.value, FlowKind.BARE.value


@dataclass(frozen=True, slots=True)
class Repetition:
    """One repetition's segments and its settlement round trips to the node (seconds)."""

    segments: tuple[FlowSegment, ...]
    round_trips_s: tuple[float, ...]

    def find(self, backend: str, kind: str, concurrency: int) -> FlowSegment | None:
        """The segment measured for (backend, kind, concurrency) in this repetition, if any."""
        for segment in self.segments:
            if (segment.backend, segment.kind, segment.concurrency) == (backend, kind, concurrency):
                return segment
        return None

    @property
    def round_trip_ms(self) -> float | None:
        """The median settlement round trip to the node, in milliseconds."""
        value = percentile(self.round_trips_s, 0.5)
        return None if value is None else value * 1000


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _spread(values: Sequence[float], digits: int = 1) -> str:
    if not values:
        return "–"
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:,.{digits}f}"
    return f"{middle:,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def _values(
    runs: Sequence[Repetition],
    backend: str,
    kind: str,
    concurrency: int,
    value: Callable[[FlowSegment], float | None],
) -> list[float]:
    found = (run.find(backend, kind, concurrency) for run in runs)
    return [v for v in (value(s) for s in found if s is not None) if v is not None]


def _throughput_ratios(runs: Sequence[Repetition], backend: str, concurrency: int) -> list[float]:
    ratios = []
    for run in runs:
        paid, bare = run.find(backend, PAID, concurrency), run.find(backend, BARE, concurrency)
        if paid is not None and bare is not None and bare.rate > 0:
            ratios.append(paid.rate / bare.rate)
    return ratios


def _latency_excess_ms(runs: Sequence[Repetition], backend: str) -> list[float]:
    """Per repetition: paid p50 at c=1 minus (bare p50 at c=1 + two node round trips + the allowance);
    ≤ 0 passes."""
    excess = []
    for run in runs:
        paid, bare = run.find(backend, PAID, 1), run.find(backend, BARE, 1)
        if paid is None or bare is None:
            continue
        paid_p50, bare_p50, trip = paid.latency_ms(0.5), bare.latency_ms(0.5), run.round_trip_ms
        if paid_p50 is not None and bare_p50 is not None and trip is not None:
            excess.append(paid_p50 - bare_p50 - 2 * trip - LATENCY_ALLOWANCE_MS)
    return excess


def _p99_ratios(runs: Sequence[Repetition], backend: str, concurrency: int) -> list[float]:
    """Per repetition: paid p99 over bare p99 at `concurrency`."""
    ratios = []
    for run in runs:
        paid, bare = run.find(backend, PAID, concurrency), run.find(backend, BARE, concurrency)
        if paid is None or bare is None:
            continue
        paid_p99, bare_p99 = paid.latency_ms(0.99), bare.latency_ms(0.99)
        if paid_p99 is not None and bare_p99:
            ratios.append(paid_p99 / bare_p99)
    return ratios


def _backends(runs: Sequence[Repetition]) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs:
        for segment in run.segments:
            if segment.backend != IN_MEMORY:
                seen.setdefault(segment.backend)
    return list(seen)


def _clean(runs: Sequence[Repetition]) -> bool:
    return all(s.ok == s.count and not s.problems for run in runs for s in run.segments)


def targets_met(runs: Sequence[Repetition], concurrency: int) -> bool:
    """Whether the three targets hold on every backend and every segment passed its checks."""
    for backend in _backends(runs):
        ratio = _median(_throughput_ratios(runs, backend, concurrency))
        excess = _median(_latency_excess_ms(runs, backend))
        p99 = _median(_p99_ratios(runs, backend, concurrency))
        if ratio is None or ratio < THROUGHPUT_MIN_RATIO or excess is None or excess > 0:
            return False
        if p99 is None or p99 > P99_MAX_RATIO:
            return False
    return _clean(runs)


def _verdict(passed: bool) -> str:
    return "yes" if passed else "**NO**"


def _backend_rows(runs: Sequence[Repetition], backend: str, concurrency: int) -> list[str]:
    def both(c: int, value: Callable[[FlowSegment], float | None]) -> tuple[str, str]:
        return _spread(_values(runs, backend, PAID, c, value)), _spread(
            _values(runs, backend, BARE, c, value)
        )

    ratios = _throughput_ratios(runs, backend, concurrency)
    ratio = _median(ratios)
    paid, bare = both(concurrency, lambda s: s.rate)
    rows = [
        f"| {backend}: tasks/s, c={concurrency} | {paid} | {bare} | "
        f"{'–' if ratio is None else f'{ratio:.0%}'} | ≥ {THROUGHPUT_MIN_RATIO:.0%} of bare | "
        f"{_verdict(ratio is not None and ratio >= THROUGHPUT_MIN_RATIO)} |"
    ]
    excess = _median(_latency_excess_ms(runs, backend))
    trips = [t for t in (run.round_trip_ms for run in runs) if t is not None]
    paid, bare = both(1, lambda s: s.latency_ms(0.5))
    paid_p50 = _median(_values(runs, backend, PAID, 1, lambda s: s.latency_ms(0.5)))
    bare_p50 = _median(_values(runs, backend, BARE, 1, lambda s: s.latency_ms(0.5)))
    over = "–" if paid_p50 is None or bare_p50 is None else f"+{paid_p50 - bare_p50:,.1f} ms"
    allowed = (
        "–"
        if not trips
        else f"≤ bare + {2 * statistics.median(trips) + LATENCY_ALLOWANCE_MS:.1f} ms "
        f"(2 node round trips + {LATENCY_ALLOWANCE_MS:g} ms)"
    )
    rows.append(
        f"| {backend}: p50 ms, c=1 | {paid} | {bare} | {over} | {allowed} | "
        f"{_verdict(excess is not None and excess <= 0)} |"
    )
    rate_ratio = _median(_throughput_ratios(runs, backend, 1))
    paid, bare = both(1, lambda s: s.rate)
    rows.append(
        f"| {backend}: tasks/s, c=1 | {paid} | {bare} | "
        f"{'–' if rate_ratio is None else f'{rate_ratio:.0%}'} | – | – |"
    )
    paid, bare = both(1, lambda s: s.latency_ms(0.99))
    rows.append(f"| {backend}: p99 ms, c=1 | {paid} | {bare} | – | – | – |")
    paid, bare = both(concurrency, methodcaller("latency_ms", 0.5))
    rows.append(f"| {backend}: p50 ms, c={concurrency} | {paid} | {bare} | – | – | – |")
    paid, bare = both(concurrency, methodcaller("latency_ms", 0.99))
    p99 = _median(_p99_ratios(runs, backend, concurrency))
    rows.append(
        f"| {backend}: p99 ms, c={concurrency} | {paid} | {bare} | "
        f"{'–' if p99 is None else f'{p99:.2f}x'} | ≤ {P99_MAX_RATIO:g}x bare | "
        f"{_verdict(p99 is not None and p99 <= P99_MAX_RATIO)} |"
    )
    paid, bare = both(concurrency, lambda s: s.server_cpu_ms)
    cpu_paid = _median(_values(runs, backend, PAID, concurrency, lambda s: s.server_cpu_ms))
    cpu_bare = _median(_values(runs, backend, BARE, concurrency, lambda s: s.server_cpu_ms))
    cpu_ratio = "–" if not cpu_paid or not cpu_bare else f"{cpu_paid / cpu_bare:.2f}x"
    title = f"{backend}: server CPU ms per task, c={concurrency}"
    rows.append(f"| {title} | {paid} | {bare} | {cpu_ratio} | – | – |")
    return rows


def _faults(segments: Sequence[FlowSegment]) -> str:
    total = sum(s.count for s in segments)
    failed = sum(s.count - s.ok for s in segments)
    problems = sum(len(s.problems) for s in segments)
    return f"{failed} of {total} failed" + (f", {problems} check(s) broken" if problems else ", checks ok")


def _summary_rows(runs: Sequence[Repetition], concurrency: int) -> list[str]:
    trips_ms = [t * 1000 for run in runs for t in run.round_trips_s]
    rows = [
        f"| settlement round trip to the node (`eth_sendRawTransaction` + receipt), p50 (p99) ms | "
        f"{_spread([t for t in (run.round_trip_ms for run in runs) if t is not None], 2)} "
        f"({percentile(trips_ms, 0.99) or 0:.2f}) | – | – | – | – |"
    ]
    memory = [_spread(_values(runs, IN_MEMORY, BARE, c, lambda s: s.rate), 0) for c in (1, concurrency)]
    if any(m != "–" for m in memory):
        rows.append(
            f"| bare flow with tasks in memory (`InMemoryTaskStore`): flows/s, c=1 / c={concurrency} | – | "
            f"{memory[0]} / {memory[1]} | – | – | – |"
        )
    segments = [s for run in runs for s in run.segments]
    paid = [s for s in segments if s.kind == PAID]
    bare = [s for s in segments if s.kind == BARE]
    verdict = _verdict(_clean(runs))
    rows.append(f"| failed tasks, broken checks | {_faults(paid)} | {_faults(bare)} | – | 0 | {verdict} |")
    signing = [v for v in (s.sign_cpu_ms for s in paid) if v is not None]
    client = [v for v in (s.loadgen_cpu_ms for s in paid) if v is not None]
    if signing and client:
        rows.append(
            f"| client: signing CPU per paid task (eth-account + coincurve), ms | {_spread(signing, 2)} "
            f"= {statistics.median(signing) / statistics.median(client):.0%} of the load generator's CPU "
            f"per paid task ({statistics.median(client):.2f} ms) | – | – | – | – |"
        )
    return rows


def _median_cell(
    segments: Sequence[FlowSegment], value: Callable[[FlowSegment], float | None], digits: int = 1
) -> str:
    values = [v for v in (value(s) for s in segments) if v is not None]
    return f"{statistics.median(values):,.{digits}f}" if values else "–"


def _detail_rows(runs: Sequence[Repetition]) -> list[str]:
    grouped: dict[tuple[str, str, int], list[FlowSegment]] = {}
    for run in runs:
        for segment in run.segments:
            grouped.setdefault((segment.backend, segment.kind, segment.concurrency), []).append(segment)
    rows = []
    for (backend, kind, concurrency), segments in grouped.items():
        failures: Counter[str] = Counter()
        for segment in segments:
            failures.update(segment.failures)
        failed = ", ".join(f"{reason} ×{n}" for reason, n in failures.most_common()) or "0"
        heights = f"{min(s.height_start for s in segments)}→{max(s.height_end for s in segments)}"
        figures: list[tuple[Callable[[FlowSegment], float | None], int]] = [
            (lambda s: s.latency_ms(0.5), 1),
            (lambda s: s.latency_ms(0.99), 1),
            (lambda s: s.first_ms(0.5), 1),
            (lambda s: s.second_ms(0.5), 1),
            (lambda s: s.server_cpu_ms, 1),
            (lambda s: s.db_cpu_ms, 1),
            (lambda s: s.anvil_cpu_ms, 2),
            (lambda s: s.loadgen_cpu_ms, 2),
            (lambda s: s.sign_cpu_ms, 2),
        ]
        cells = " | ".join(_median_cell(segments, value, digits) for value, digits in figures)
        rows.append(
            f"| {backend} | {kind} | {concurrency} | {segments[0].count}×{len(segments)} "
            f"| {_spread([s.rate for s in segments])} | {cells} | {failed} | {heights} |"
        )
    return rows


def render_report(runs: Sequence[Repetition], *, concurrency: int, header: Sequence[str]) -> str:
    """The full Markdown summary of a merchant benchmark run."""
    lines = [*header, ""]
    lines += ["| metric | paid (merchant) | bare (a2a-sdk, no payment) | ratio | target | pass? |"]
    lines += ["|---|---|---|---|---|---|"]
    for backend in _backends(runs):
        lines += _backend_rows(runs, backend, concurrency)
    lines += _summary_rows(runs, concurrency)
    lines += [
        "",
        "Per segment (medians over repetitions; latencies in ms; RT1 = request → input required, RT2 = "
        "follow-up → completed; CPU is milliseconds per task from /proc; PostgreSQL CPU counts the "
        "backends serving the segment's database):",
        "",
        "| backend | flow | c | N×reps | tasks/s | p50 | p99 | RT1 p50 | RT2 p50 | server CPU "
        "| PostgreSQL CPU | anvil CPU | load-gen CPU | of which signing | failed | heights |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *_detail_rows(runs),
    ]
    problems = [
        f"- rep {index + 1} {s.backend} {s.kind} c={s.concurrency}: {problem}"
        for index, run in enumerate(runs)
        for s in run.segments
        for problem in s.problems
    ]
    lines += [
        "",
        "Correctness checks (every task completed, payee balance, relayer transactions, ledger):",
        "",
    ]
    lines += problems or ["- all segments passed their checks"]
    samples: dict[tuple[str, str], str] = {}
    for run in runs:
        for s in run.segments:
            for reason, message in s.failure_samples.items():
                samples.setdefault((f"{s.backend} {s.kind}", reason), message)
    if samples:
        lines += ["", "Failure samples (first message per flow and reason):", ""]
        lines += [f"- {flow}, {reason}: {message[:200]}" for (flow, reason), message in samples.items()]
    return "\n".join(lines) + "\n"
