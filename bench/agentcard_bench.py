"""Agent Card parsing: how `agentcard.parse_card_json` costs beside plain `json.loads`, and how it grows.

Run ``python -m bench.agentcard_bench`` (a few seconds) or with ``--quick``. The parser checks the
nesting depth and refuses duplicate members, NaN and overflowing numbers before and while ``json.loads``
reads the card; this measures what that costs on cards of N and 10N skills, whose strings hold brackets and
escaped quotes (what the nesting check must skip), and on one whose strings are long runs of escapes.
Every parse is checked to return the card it was given.

Figures are the best of several repetitions of the process's CPU time (the figure least moved by other
work on the machine), shown as ratios: ours against ``json.loads`` of the same bytes, and each parser's
10N time against its N time (about 10 for work that grows linearly, about 100 for quadratic work). The
summary goes to stdout and to ``bench/results/agentcard-latest.md``; the exit status is 1 when a target is
missed (the growth; the cost beside ``json.loads``, mostly the duplicate-member hook run in Python
for every object, is shown for context).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from a2a_x402.agentcard import MAX_CARD_BYTES, parse_card_json

__all__ = ["main"]

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "agentcard-latest.md"
FULL_SKILLS = 1000
"""Skills of the 10N card: about 140 KB, over half of `MAX_CARD_BYTES`."""
MAX_GROWTH = 15.0
"""Target: ten times the card costs at most this many times as much (linear work, with some noise)."""


def _card(skills: int) -> dict[str, Any]:
    return {"skills": [{"id": str(i), "name": 'n\\"[{', "tags": ["t"] * 20} for i in range(skills)]}


def _escapes_card(skills: int) -> dict[str, Any]:
    return {"skills": [{"id": str(i), "description": '\\"[{' * 25} for i in range(skills)]}


def _best_cpu_s(parse: Callable[[bytes], object], body: bytes, *, loops: int, repetitions: int) -> float:
    """The least CPU time, over `repetitions`, of one parse (the mean of `loops` parses in a row)."""
    best = float("inf")
    for _ in range(repetitions):
        started = time.process_time()
        for _ in range(loops):
            parse(body)
        best = min(best, (time.process_time() - started) / loops)
    return best


def _plain(body: bytes) -> object:
    return json.loads(body)


def _ours(body: bytes) -> object:
    return parse_card_json(body, max_bytes=MAX_CARD_BYTES)


@dataclass(frozen=True, slots=True)
class Row:
    """One card's figures: CPU per parse of both parsers at N and 10N skills."""

    name: str
    size_bytes: int
    ours_n_s: float
    ours_10n_s: float
    plain_n_s: float
    plain_10n_s: float

    @property
    def overhead(self) -> float:
        """Ours against `json.loads` on the 10N card."""
        return self.ours_10n_s / self.plain_10n_s

    @property
    def growth(self) -> float:
        """Ours at 10N against ours at N."""
        return self.ours_10n_s / self.ours_n_s

    @property
    def plain_growth(self) -> float:
        """`json.loads` at 10N against itself at N."""
        return self.plain_10n_s / self.plain_n_s

    @property
    def met(self) -> bool:
        """Whether the growth target is met."""
        return self.growth <= MAX_GROWTH


def measure(name: str, build: Callable[[int], dict[str, Any]], *, loops: int, repetitions: int) -> Row:
    """Measure both parsers on `build(N)` and `build(10N)`, after checking they read the card back."""
    small, full = build(FULL_SKILLS // 10), build(FULL_SKILLS)
    small_body, full_body = json.dumps(small).encode(), json.dumps(full).encode()
    if len(full_body) > MAX_CARD_BYTES or _ours(full_body) != full or _ours(small_body) != small:
        raise SystemExit(f"{name}: the card is over the size limit or does not parse back to itself")
    timing = {"loops": loops, "repetitions": repetitions}
    return Row(
        name=name,
        size_bytes=len(full_body),
        ours_n_s=_best_cpu_s(_ours, small_body, loops=loops * 10, repetitions=repetitions),
        ours_10n_s=_best_cpu_s(_ours, full_body, **timing),
        plain_n_s=_best_cpu_s(_plain, small_body, loops=loops * 10, repetitions=repetitions),
        plain_10n_s=_best_cpu_s(_plain, full_body, **timing),
    )


def render(rows: Sequence[Row], header: Sequence[str]) -> str:
    """The Markdown summary."""
    lines = [*header, ""]
    lines.append("| card (10N size) | ours / json.loads, 10N | growth N to 10N, ours | json.loads | pass? |")
    lines.append("|---|---|---|---|---|")
    for row in rows:
        card = f"{row.name} ({row.size_bytes // 1024} KiB)"
        growth = f"{row.growth:.1f}x (≤ {MAX_GROWTH:g}x)"
        met = "yes" if row.met else "no"
        lines.append(f"| {card} | {row.overhead:.2f}x | {growth} | {row.plain_growth:.1f}x | {met} |")
    lines.append("")
    lines.append("CPU per parse at 10N, ms: " + ", ".join(f"{r.name} {r.ours_10n_s * 1e3:.2f}" for r in rows))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the summary and write it to bench/results/agentcard-latest.md."""
    parser = argparse.ArgumentParser(prog="python -m bench.agentcard_bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--output", type=Path, default=RESULTS_PATH, help="where to write the summary")
    args = parser.parse_args(argv)
    loops, repetitions = (3, 3) if args.quick else (10, 7)
    rows = [
        measure("skills with brackets and escaped quotes", _card, loops=loops, repetitions=repetitions),
        measure("long runs of escapes in strings", _escapes_card, loops=loops, repetitions=repetitions),
    ]
    header = [
        f"# Agent Card parsing ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Python {platform.python_version()} on {platform.machine()}, {FULL_SKILLS // 10} and {FULL_SKILLS}"
        f" skills, best of {repetitions} repetitions of CPU time.",
    ]
    summary = render(rows, header)
    sys.stdout.write(summary)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(summary)
    return 0 if all(row.met for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
