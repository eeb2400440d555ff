"""Merchant throughput: paid tasks end to end beside the same two-round-trip flow on a bare a2a-sdk server.

Run ``python -m bench.merchant_bench`` (about three and a half minutes on two cores) or with
``--quick`` (a little over a minute, one small repetition). One paid task is two JSON-RPC round trips to
the reference merchant (``x402-merchant serve``: one uvicorn worker, in-process facilitator): the request,
answered with the payment terms (``TASK_STATE_INPUT_REQUIRED``), then the authorization signed for
those terms, answered once it is verified, settled on chain and booked in the ledger
(``TASK_STATE_COMPLETED``). The bare flow (``bench._merchant_bare_app``) makes the same two round trips to
an a2a-sdk server without payment, its tasks in the same kind of database. Each repetition measures:

* one settlement round trip to the node: a pre-signed settlement transaction sent to anvil and its
  receipt read, one at a time;
* on PostgreSQL and on SQLite, paid and bare back to back, at concurrency 1 and 32, each segment on a
  fresh database, a freshly started server and a reset chain;
* the bare flow with the SDK's in-memory task store, for context.

Paid segments check that every task completed with its artifact and receipts, that the payee received
exactly the price times the tasks, that the relayer mined one transaction per task and that the ledger
booked one credit of the price per task; bare segments, that every flow completed and the chain did not
move. The summary goes to stdout and to ``bench/results/merchant-latest.md``; the exit status is 1 when a
target is missed or a check failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from ._chain import BenchChain, ChainState, start_bench_chain
from ._merchant_flows import (
    FlowKind,
    FlowSegment,
    SegmentProbe,
    measure_settlement_round_trips,
    percentile,
    run_flows,
)
from ._merchant_report import IN_MEMORY, Repetition, render_report, targets_met
from ._merchant_servers import (
    Backend,
    Databases,
    LedgerTotals,
    ledger_totals,
    postgres_backend_cpu,
    postgres_version,
    start_bare,
    start_merchant,
)
from ._payloads import AMOUNT_ATOMIC
from ._servers import ServerProcess

__all__ = ["Plan", "main"]

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "merchant-latest.md"
PRICE_ATOMIC = AMOUNT_ATOMIC
"""The merchant's price per task (0.001 dev USDC), the amount of every settlement in the run."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How many flows each segment runs, and how often the whole set is repeated."""

    repetitions: int
    paid_sequential: int
    paid_concurrent: int
    bare_sequential: int
    bare_concurrent: int
    memory_sequential: int
    memory_concurrent: int
    round_trips: int
    backends: tuple[Backend, ...] = (Backend.POSTGRESQL, Backend.SQLITE)
    concurrency: int = 32
    warmup: int = 5
    payers: int = 8


FULL = Plan(
    repetitions=2,
    paid_sequential=40,
    paid_concurrent=160,
    bare_sequential=80,
    bare_concurrent=320,
    memory_sequential=200,
    memory_concurrent=640,
    round_trips=200,
)
QUICK = Plan(
    repetitions=1,
    paid_sequential=15,
    paid_concurrent=64,
    bare_sequential=30,
    bare_concurrent=128,
    memory_sequential=0,
    memory_concurrent=0,
    round_trips=50,
)


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _describe(rep: int, segment: FlowSegment) -> str:
    checks = "checks ok" if not segment.problems else "; ".join(segment.problems)
    p50 = segment.latency_ms(0.5)
    return (
        f"rep {rep + 1}: {segment.backend:<10} {segment.kind:<4} c={segment.concurrency:<3} "
        f"{segment.rate:7.1f} tasks/s  p50 {p50 or 0:7.1f} ms  {segment.count - segment.ok} failed of "
        f"{segment.count}  height {segment.height_start}->{segment.height_end}  {checks}"
    )


def _paid_problems(
    segment: FlowSegment,
    chain_before: ChainState,
    chain_after: ChainState,
    ledger_before: LedgerTotals,
    ledger_after: LedgerTotals,
) -> list[str]:
    problems = []
    if segment.ok != segment.count:
        problems.append(f"{segment.count - segment.ok} of {segment.count} tasks did not complete")
    received = chain_after.payee_balance - chain_before.payee_balance
    if received != PRICE_ATOMIC * segment.ok:
        problems.append(f"payee balance grew by {received}, expected {PRICE_ATOMIC * segment.ok}")
    mined = chain_after.relayer_nonce - chain_before.relayer_nonce
    if mined != segment.ok:
        problems.append(f"relayer mined {mined} transactions for {segment.ok} completed tasks")
    booked = ledger_after.credits - ledger_before.credits
    credited = ledger_after.credited_atomic - ledger_before.credited_atomic
    if booked != segment.ok or credited != PRICE_ATOMIC * segment.ok:
        problems.append(
            f"ledger booked {booked} credits of {credited} atomic units for {segment.ok} completed tasks"
        )
    return problems


class _Runner:
    """Runs the segments of a plan on one chain and collects them per repetition."""

    def __init__(self, chain: BenchChain, plan: Plan, workdir: Path, databases: Databases) -> None:
        self.chain = chain
        self.plan = plan
        self.workdir = workdir
        self.databases = databases

    def _probe(self, server: ServerProcess, database_url: str | None) -> SegmentProbe:
        if database_url is None or not database_url.startswith("postgresql"):
            return SegmentProbe(server, self.chain)
        return SegmentProbe(server, self.chain, functools.partial(postgres_backend_cpu, database_url))

    def _flows(
        self, probe: SegmentProbe, backend: str, kind: FlowKind, concurrency: int, count: int
    ) -> FlowSegment:
        return run_flows(
            probe,
            backend=backend,
            kind=kind,
            payer_keys=self.chain.chain.payer_keys,
            concurrency=concurrency,
            count=count,
        )

    def _warm_up(self, probe: SegmentProbe, backend: str, kind: FlowKind) -> None:
        """A few untimed flows, so first-call costs (imports, pools, caches) fall outside the timing."""
        warm = self._flows(probe, backend, kind, 1, self.plan.warmup)
        if warm.ok != warm.count:
            reasons = "; ".join(f"{r}: {m[:200]}" for r, m in warm.failure_samples.items())
            raise RuntimeError(
                f"{probe.server.name} failed its warm-up: {reasons}\n{probe.server.log_tail()}"
            )

    def paid(self, rep: int, backend: Backend, concurrency: int, count: int) -> FlowSegment:
        """Paid tasks on a fresh merchant and database, from the reset chain (relayers cache nonces)."""
        self.chain.reset()
        tag = f"{rep}-{backend.name.lower()}-paid-{concurrency}"
        database_url = self.databases.fresh(backend, tag)
        server = start_merchant(
            self.chain, database_url=database_url, price_atomic=PRICE_ATOMIC, workdir=self.workdir, tag=tag
        )
        try:
            probe = self._probe(server, database_url)
            self._warm_up(probe, backend.value, FlowKind.PAID)
            chain_before, ledger_before = self.chain.state(), ledger_totals(database_url)
            segment = self._flows(probe, backend.value, FlowKind.PAID, concurrency, count)
            chain_after, ledger_after = self.chain.state(), ledger_totals(database_url)
        finally:
            server.stop()
        problems = _paid_problems(segment, chain_before, chain_after, ledger_before, ledger_after)
        return self._finish(rep, segment, chain_before, chain_after, problems)

    def bare(self, rep: int, backend: str, concurrencies: Sequence[tuple[int, int]]) -> list[FlowSegment]:
        """Bare flows on a freshly started bare server, tasks in a fresh `backend` database or in memory."""
        self.chain.reset()
        tag = f"{rep}-{backend.lower()}-bare-{concurrencies[0][0]}"
        database_url = None if backend == IN_MEMORY else self.databases.fresh(Backend(backend), tag)
        server = start_bare(database_url=database_url, workdir=self.workdir, tag=tag)
        segments = []
        try:
            probe = self._probe(server, database_url)
            self._warm_up(probe, backend, FlowKind.BARE)
            for concurrency, count in concurrencies:
                before = self.chain.state()
                segment = self._flows(probe, backend, FlowKind.BARE, concurrency, count)
                after = self.chain.state()
                problems = []
                if segment.ok != segment.count:
                    problems.append(f"{segment.count - segment.ok} of {segment.count} flows did not complete")
                if after.height != before.height:
                    problems.append(f"the bare flow moved the chain ({before.height} -> {after.height})")
                segments.append(self._finish(rep, segment, before, after, problems))
        finally:
            server.stop()
        return segments

    def _finish(
        self, rep: int, segment: FlowSegment, before: ChainState, after: ChainState, problems: list[str]
    ) -> FlowSegment:
        done = dataclasses.replace(
            segment, height_start=before.height, height_end=after.height, problems=tuple(problems)
        )
        _progress(_describe(rep, done))
        return done

    def round_trips(self, rep: int) -> tuple[float, ...]:
        """Settlement round trips to the node, from the reset chain."""
        self.chain.reset()
        trips = measure_settlement_round_trips(self.chain, self.plan.round_trips)
        p50 = (percentile(trips, 0.5) or 0) * 1000
        _progress(f"rep {rep + 1}: node       settlement round trip p50 {p50:.2f} ms over {len(trips)}")
        return tuple(trips)

    def repetition(self, rep: int) -> Repetition:
        """One full set of segments. Paid and bare run back to back for each backend and concurrency, so a
        ratio compares figures taken seconds apart; which goes first alternates between repetitions."""
        plan = self.plan
        trips = self.round_trips(rep)
        segments: list[FlowSegment] = []
        sizes = (
            (1, plan.paid_sequential, plan.bare_sequential),
            (plan.concurrency, plan.paid_concurrent, plan.bare_concurrent),
        )
        for backend in plan.backends:
            for concurrency, paid_count, bare_count in sizes:
                kinds = [FlowKind.PAID, FlowKind.BARE] if rep % 2 == 0 else [FlowKind.BARE, FlowKind.PAID]
                for kind in kinds:
                    if kind is FlowKind.PAID:
                        segments.append(self.paid(rep, backend, concurrency, paid_count))
                    else:
                        segments += self.bare(rep, backend.value, [(concurrency, bare_count)])
        if plan.memory_sequential and plan.memory_concurrent:
            segments += self.bare(
                rep, IN_MEMORY, [(1, plan.memory_sequential), (plan.concurrency, plan.memory_concurrent)]
            )
        return Repetition(segments=tuple(segments), round_trips_s=tuple(trips))


def _header(
    chain: BenchChain,
    plan: Plan,
    started: datetime,
    elapsed_s: float,
    snapshot_height: int,
    loads: tuple[tuple[float, ...], tuple[float, ...]],
) -> list[str]:
    packages = ", ".join(
        f"{name} {version(name)}"
        for name in ("a2a-sdk", "uvicorn", "starlette", "fastapi", "sqlalchemy", "asyncpg", "aiosqlite")
    )
    postgres = f"PostgreSQL {postgres_version()}" if Backend.POSTGRESQL in plan.backends else ""
    load_start, load_end = (", ".join(f"{v:.1f}" for v in load) for load in loads)
    return [
        f"## Merchant benchmark, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs, load average (1, 5, 15 min) {load_start} "
        f"at the start and {load_end} at the end; Python {platform.python_version()}, anvil "
        f"{chain.anvil_version()}, {postgres}; {packages}.",
        f"- Chain: anvil automine, chain id {chain.chain.chain_id}, the project's DevUSDC; every segment "
        f"starts from a snapshot at height {snapshot_height} (evm_revert) plus one empty block that sets the "
        "chain's clock to now.",
        "- Paid: `x402-merchant serve` (one uvicorn worker, in-process facilitator, 1 confirmation, "
        f"defaults otherwise), price {PRICE_ATOMIC} atomic units, on a fresh database migrated with "
        "`x402-merchant db upgrade`. Bare: `bench/_merchant_bare_app.py` (a2a-sdk `DefaultRequestHandler`, "
        "`DatabaseTaskStore` on the same kind of fresh database, `create_jsonrpc_routes`; the same "
        "text-stats work on the follow-up) under the uvicorn CLI, one worker.",
        f"- Work: {plan.repetitions} repetition(s); per backend, paid c=1 N={plan.paid_sequential}, "
        f"c={plan.concurrency} N={plan.paid_concurrent}; bare c=1 N={plan.bare_sequential}, "
        f"c={plan.concurrency} N={plan.bare_concurrent}; {plan.warmup} untimed flows first on every server. "
        "The client signs each authorization between the two round trips (an offer's terms are only known "
        "from the first answer). Load generator: raw asyncio HTTP/1.1 keep-alive client on uvloop, one "
        f"connection per concurrent flow. Run took {elapsed_s:.0f} s.",
        "- Figures are medians over repetitions (min–max); a ratio or margin is taken within each "
        "repetition, then its median is shown. A task's latency runs from sending the request to reading "
        "the completed task, client signing included.",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the summary and write it to bench/results/merchant-latest.md."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.merchant_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="one small repetition (a little over a minute)")
    parser.add_argument("--repetitions", type=int, default=None, help="override the number of repetitions")
    parser.add_argument(
        "--backend",
        choices=[b.name.lower() for b in Backend],
        action="append",
        help="measure only this database backend (repeatable; default both)",
    )
    parser.add_argument(
        "--output", type=Path, default=RESULTS_PATH, help="where to write the Markdown summary"
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.repetitions is not None:
        plan = dataclasses.replace(plan, repetitions=max(1, args.repetitions))
    if args.backend:
        plan = dataclasses.replace(plan, backends=tuple(Backend[name.upper()] for name in args.backend))
    started, clock, load_start = datetime.now(UTC), time.monotonic(), os.getloadavg()
    runs: list[Repetition] = []
    with (
        tempfile.TemporaryDirectory(prefix="x402-merchant-bench-") as workdir,
        start_bench_chain(plan.payers) as chain,
        Databases(Path(workdir), plan.backends) as databases,
    ):
        snapshot_height = chain.state().height
        runner = _Runner(chain, plan, Path(workdir), databases)
        for rep in range(plan.repetitions):
            runs.append(runner.repetition(rep))
        loads = (load_start, os.getloadavg())
        header = _header(chain, plan, started, time.monotonic() - clock, snapshot_height, loads)
    report = render_report(runs, concurrency=plan.concurrency, header=header)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    _progress(f"written to {args.output}")
    return 0 if targets_met(runs, plan.concurrency) else 1


if __name__ == "__main__":
    sys.exit(main())
