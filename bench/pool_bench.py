"""Relayer pool and fee spikes: settling through leased keys in one or two processes, and a batch of
settlements caught by a base-fee spike, with and without fee-bumped replacements.

Run ``python -m bench.pool_bench`` (a few minutes on two cores) or with ``--quick``. Each repetition, every
segment from the same reset chain:

* the node's ceiling: pre-signed ``transferWithAuthorization`` transactions sent straight to anvil;
* ``x402-facilitator serve`` on one fresh PostgreSQL database: one process with one key, one process with
  two keys, and two processes with two keys each (``X402_RELAYER_MAX_KEYS=2``), settling at concurrency
  50 spread evenly over the processes; each segment checks that the payee got exactly the amount times
  the successes and that the keys mined one transaction per success;
* the fee spike: N settlements sent with mining off, then every block priced at three times their
  maxFeePerGas (``anvil_setNextBlockBaseFeePerGas``), one block a second; with fee bumping on
  (``X402_FEE_BUMP_AFTER_S=2``) the time from the spike until each settlement is mined, and how many
  transactions were sent; with it off, how many are mined within the window.

The summary goes to stdout and to ``bench/results/pool-latest.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ._chain import BenchChain, start_bench_chain
from ._merchant_servers import Backend, Databases, postgres_version
from ._payloads import eip3009_batch, make_requirements, sign_payloads
from ._pool_segments import PoolSegment, SpikeSegment, measure_pool, measure_spike
from ._segments import Segment, measure_raw
from ._servers import migrate_claim_store

__all__ = ["main"]

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "pool-latest.md"
SHAPES = ((1, 1), (1, 2), (2, 2))


@dataclass(frozen=True, slots=True)
class Plan:
    """How much work each segment does."""

    repetitions: int
    settle_count: int
    spike_count: int
    spike_window_s: float
    no_bump_window_s: float
    concurrency: int = 50
    payers: int = 8


FULL = Plan(repetitions=3, settle_count=500, spike_count=20, spike_window_s=60.0, no_bump_window_s=15.0)
QUICK = Plan(repetitions=1, settle_count=200, spike_count=10, spike_window_s=40.0, no_bump_window_s=8.0)


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _pool_line(segment: PoolSegment, ceiling: float) -> str:
    checks = "checks ok" if not segment.problems else "; ".join(segment.problems)
    failures = sum(segment.failures.values())
    return (
        f"{segment.label:<22} {segment.rate:7.1f} settle/s  {segment.rate / ceiling:5.0%} of the node  "
        f"{failures} failed of {segment.count} {dict(segment.failures) or ''}  {checks}"
    )


def _spike_line(segment: SpikeSegment) -> str:
    times = segment.mined_after_s
    spread = f"p50 {statistics.median(times):.1f} s, max {max(times):.1f} s" if times else "none mined"
    return (
        f"{segment.label:<16} {segment.ok}/{segment.count} mined within {segment.window_s:.0f} s "
        f"of the spike ({spread}); {segment.transactions_sent} transactions sent; base fee "
        f"{segment.base_fee_before / 1e9:.3g} -> {segment.base_fee_spiked / 1e9:.3g} gwei"
    )


def _repetition(
    rep: int, chain: BenchChain, plan: Plan, databases: Databases, spike_template: Path, workdir: Path
) -> tuple[Segment, list[PoolSegment], list[SpikeSegment]]:
    requirements = make_requirements(chain.chain, chain.pay_to)
    chain.reset()
    payloads = sign_payloads(chain.chain.payer_keys, requirements, plan.settle_count)
    ceiling = measure_raw(chain, eip3009_batch(chain.chain, payloads, requirements))
    _progress(f"rep {rep + 1}: node ceiling {ceiling.rate:.1f}/s")
    pools = []
    for processes, keys_each in SHAPES:
        chain.reset()
        segment = measure_pool(
            chain,
            databases.fresh(Backend.POSTGRESQL, f"pool-{rep}-{processes}x{keys_each}"),
            processes=processes,
            keys_each=keys_each,
            payloads=sign_payloads(chain.chain.payer_keys, requirements, plan.settle_count),
            requirements=requirements,
            concurrency=plan.concurrency,
            workdir=workdir,
        )
        _progress(f"rep {rep + 1}: {_pool_line(segment, ceiling.rate)}")
        pools.append(segment)
    spikes = []
    for bump, window in ((True, plan.spike_window_s), (False, plan.no_bump_window_s)):
        chain.reset()
        database = workdir / f"spike-{rep}-{bump}.db"
        shutil.copyfile(spike_template, database)
        spike = measure_spike(
            chain,
            f"sqlite+aiosqlite:///{database}",
            bump=bump,
            payloads=sign_payloads(chain.chain.payer_keys, requirements, plan.spike_count),
            requirements=requirements,
            window_s=window,
        )
        _progress(f"rep {rep + 1}: {_spike_line(spike)}")
        spikes.append(spike)
    return ceiling, pools, spikes


def _median(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def _report(
    runs: list[tuple[Segment, list[PoolSegment], list[SpikeSegment]]],
    plan: Plan,
    started: datetime,
    took_s: float,
) -> str:
    lines = [
        f"## Relayer pool and fee-spike benchmark, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"PostgreSQL {postgres_version()}; {plan.repetitions} repetition(s), run took {took_s:.0f} s.",
        f"- Pool segments: settle N={plan.settle_count} at c={plan.concurrency}, one uvicorn worker per "
        "process, one PostgreSQL database per segment; medians over repetitions (min–max).",
        "",
        "| segment | settle/s | of the node ceiling | failures | checks |",
        "| --- | --- | --- | --- | --- |",
    ]
    ceilings = [run[0].rate for run in runs]
    lines.append(f"| node ceiling (pre-signed, one connection) | {_median(ceilings)} | 100% | – | – |")
    for i in range(len(SHAPES)):
        segments = [run[1][i] for run in runs]
        ratios = [s.rate / run[0].rate for s, run in zip(segments, runs, strict=True)]
        failed = sum(sum(s.failures.values()) for s in segments)
        problems = "; ".join(p for s in segments for p in s.problems) or "ok"
        lines.append(
            f"| {segments[0].label} | {_median([s.rate for s in segments])} | "
            f"{statistics.median(ratios):.0%} | {failed} of {sum(s.count for s in segments)} | {problems} |"
        )
    lines += [
        "",
        f"- Fee spike: N={plan.spike_count} settlements sent with mining off, then every block priced at "
        "three times their maxFeePerGas, one block a second (anvil drops a transaction priced under the "
        "block's base fee from its pool when it mines that block; a replacement takes its nonce again).",
        "",
        "| fee bumping | mined / settlements | time to mine after the spike (p50, max) | transactions sent |",
        "| --- | --- | --- | --- |",
    ]
    for i in range(2):
        spikes = [run[2][i] for run in runs]
        times = [t for s in spikes for t in s.mined_after_s]
        spread = (
            f"{statistics.median(times):.1f} s, {max(times):.1f} s"
            if times
            else f"none in {spikes[0].window_s:.0f} s"
        )
        lines.append(
            f"| {spikes[0].label.removeprefix('fee bumping ')} | {sum(s.ok for s in spikes)} / "
            f"{sum(s.count for s in spikes)} | {spread} | {sum(s.transactions_sent for s in spikes)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the summary and write it to bench/results/pool-latest.md."""
    parser = argparse.ArgumentParser(prog="python -m bench.pool_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small repetition")
    parser.add_argument(
        "--output", type=Path, default=RESULTS_PATH, help="where to write the Markdown summary"
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    started, clock = datetime.now(UTC), time.monotonic()
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="x402-pool-bench-") as workdir,
        start_bench_chain(plan.payers) as chain,
        Databases(Path(workdir), (Backend.POSTGRESQL,)) as databases,
    ):
        spike_template = migrate_claim_store(Path(workdir))
        for rep in range(plan.repetitions):
            runs.append(_repetition(rep, chain, plan, databases, spike_template, Path(workdir)))
    report = _report(runs, plan, started, time.monotonic() - clock)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    _progress(f"written to {args.output}")
    failed = any(s.problems or s.failures for run in runs for s in run[1])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
