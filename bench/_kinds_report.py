"""The summary's table of settlements per kind (issue 29): settle/s of ours and the reference at concurrency
1 and 50 for each settlement kind measured, their ratio within each repetition, and the node's ceiling for
the kind with our share of it, beside each side's failures and checks.

No target is judged here (the issue asks for the figures); a failure or broken check of ours in any kind
fails the run (``bench._report.targets_met``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ._segments import NODE, OURS, REFERENCE, Segment

__all__ = ["kinds_of", "render_kinds", "segments_of_kind"]


def kinds_of(runs: Sequence[Sequence[Segment]]) -> list[str]:
    """The settlement kinds the runs measured, in the order they ran."""
    return list(dict.fromkeys(s.kind for run in runs for s in run))


def segments_of_kind(runs: Sequence[Sequence[Segment]], kind: str) -> list[list[Segment]]:
    """Each repetition's segments of `kind`."""
    return [[s for s in run if s.kind == kind] for run in runs]


def _one(run: Sequence[Segment], server: str, mode: str, concurrency: int) -> Segment | None:
    return next((s for s in run if (s.server, s.mode, s.concurrency) == (server, mode, concurrency)), None)


def _spread(values: Sequence[float], digits: int = 1) -> str:
    if not values:
        return "–"
    middle = f"{statistics.median(values):,.{digits}f}"
    return middle if len(values) == 1 else f"{middle} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def _faults(segments: Sequence[Segment]) -> str:
    if not segments:
        return "–"
    failed = sum(s.failed for s in segments)
    broken = sum(len(s.problems) for s in segments)
    checks = f"{broken} check(s) broken" if broken else "checks ok"
    return f"{failed} of {sum(s.count for s in segments)} failed, {checks}"


def _row(runs: Sequence[Sequence[Segment]], kind: str, concurrency: int, ceiling: bool) -> str:
    of_kind = segments_of_kind(runs, kind)
    ours = [s for run in of_kind if (s := _one(run, OURS, "settle", concurrency))]
    theirs = [s for run in of_kind if (s := _one(run, REFERENCE, "settle", concurrency))]
    ratios, shares, nodes = [], [], []
    for run in of_kind:
        mine, other, node = (
            _one(run, OURS, "settle", concurrency),
            _one(run, REFERENCE, "settle", concurrency),
            _one(run, NODE, "raw", 1),
        )
        if mine and other and other.rate > 0:
            ratios.append(mine.rate / other.rate)
        if ceiling and node and node.rate > 0:
            nodes.append(node.rate)
            if mine:
                shares.append(mine.rate / node.rate)
    ratio = f"{statistics.median(ratios):.2f}x" if ratios else "–"
    share = f"{statistics.median(shares):.0%}" if shares else "–"
    return (
        f"| {kind} | {concurrency} | {_spread([s.rate for s in ours])} | {_spread([s.rate for s in theirs])} "
        f"| {ratio} | {_spread(nodes) if ceiling else '–'} | {share} | {_faults(ours)} | {_faults(theirs)} |"
    )


def render_kinds(runs: Sequence[Sequence[Segment]], *, concurrency: int) -> list[str]:
    """The table's lines (empty when no settlement was measured)."""
    kinds = [k for k in kinds_of(runs) if any(s.mode == "settle" for run in runs for s in run if s.kind == k)]
    if not kinds:
        return []
    return [
        "Settlements per kind, in the same run (settle/s: medians over repetitions, min–max; a ratio is "
        "taken within each repetition; the node's ceiling for the kind ran just before ours at "
        f"c={concurrency}):",
        "",
        "| kind | c | ours settle/s | reference settle/s | ours ÷ reference | node ceiling tx/s "
        "| ours of the ceiling | ours: failed, checks | reference: failed, checks |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            _row(runs, kind, c, ceiling=c == concurrency)
            for kind in kinds
            for c in dict.fromkeys((1, concurrency))
        ),
    ]
