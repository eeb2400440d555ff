"""Facilitator throughput: ours beside the x402 Python SDK's, on one anvil chain with the project's token.

Run ``python -m bench.facilitator_bench`` (about four minutes on two cores) or with ``--quick`` (under a
minute, one small repetition). Each repetition measures, every segment from the same reset chain:

* the node's ceiling: pre-signed ``transferWithAuthorization`` transactions sent straight to anvil, just
  before our settlements at concurrency 50 (the node share compares the two);
* for ours (``x402-facilitator serve``) and the reference (``bench._x402_reference_app``), one uvicorn
  worker each, back to back: verifications sequentially and at concurrency 50, then settlements
  sequentially and at concurrency 50, each settlement segment on a freshly started server;
* the reference with two signers sharing one relayer key (two processes), settling at concurrency 50;
* with ``--baseline DIR`` (a checkout of an earlier commit, e.g. ``git worktree add --detach ../base
  ef70152``), our server running that checkout's code, settling at concurrency 50 beside ours: issue 15's
  "half the server CPU per settlement" is a comparison in the same run;
* the floor of our HTTP stack: uvicorn and Starlette answering a trivial POST of a settle body at
  concurrency 50 (``bench._http_floor_app``), for the CPU budget of the node-share target (``bench._budget``).

Each settlement segment checks that every answer succeeded, that the payee received exactly the amount
times the successes, and that the relayer mined one transaction per success. The summary goes to stdout
and to ``bench/results/facilitator-latest.md``; the exit status is 1 when a target is missed or one of our
segments failed a check.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from a2a_x402.facilitator.wire import PaymentPayload

from ._chain import BenchChain, start_bench_chain
from ._payloads import make_requirements, sign_payloads, to_requests
from ._report import render_report, targets_met
from ._segments import (
    BASELINE,
    OURS,
    REFERENCE,
    REFERENCE_TWO_SIGNERS,
    Segment,
    measure_floor,
    measure_http,
    measure_raw,
    warm_up,
)
from ._servers import ServerProcess, migrate_claim_store, start_http_floor, start_ours, start_reference

__all__ = ["Plan", "main"]

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "facilitator-latest.md"


@dataclass(frozen=True, slots=True)
class Plan:
    """How much work each segment does, and how often the whole set is repeated."""

    repetitions: int
    verify_count: int
    settle_sequential_count: int
    settle_concurrent_count: int
    two_signer_count: int
    floor_count: int
    concurrency: int = 50
    warmup_count: int = 20
    payers: int = 8


FULL = Plan(
    repetitions=3,
    verify_count=500,
    settle_sequential_count=300,
    settle_concurrent_count=500,
    two_signer_count=300,
    floor_count=2000,
)
QUICK = Plan(
    repetitions=1,
    verify_count=150,
    settle_sequential_count=100,
    settle_concurrent_count=200,
    two_signer_count=100,
    floor_count=1000,
)

StartServer = Callable[[str], ServerProcess]


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _describe(rep: int, segment: Segment) -> str:
    checks = "checks ok" if not segment.problems else "; ".join(segment.problems)
    return (
        f"rep {rep + 1}: {segment.server:<12} {segment.mode:<6} c={segment.concurrency:<3} "
        f"{segment.rate:8.1f}/s  {segment.failed} failed of {segment.count}  "
        f"height {segment.height_start}->{segment.height_end}  {checks}"
    )


@contextmanager
def _running(servers: Sequence[ServerProcess]) -> Iterator[Sequence[ServerProcess]]:
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


class _Runner:
    """Runs the segments of a plan on one chain and collects them per repetition."""

    def __init__(self, chain: BenchChain, plan: Plan, workdir: Path, baseline: Path | None = None) -> None:
        self.chain = chain
        self.plan = plan
        self.workdir = workdir
        self.requirements = make_requirements(chain.chain, chain.pay_to)
        self.template_db = migrate_claim_store(workdir)
        self.baseline = baseline
        self.baseline_db = migrate_claim_store(workdir, source=baseline, tag="baseline") if baseline else None

    def sign(self, count: int) -> list[PaymentPayload]:
        return sign_payloads(self.chain.chain.payer_keys, self.requirements, count)

    def start_ours(
        self, tag: str, *, source: Path | None = None, template_db: Path | None = None
    ) -> ServerProcess:
        chain = self.chain.chain
        return start_ours(
            rpc_url=chain.rpc_url,
            network=chain.network,
            relayer_key=chain.relayer_key,
            template_db=template_db or self.template_db,
            workdir=self.workdir,
            tag=tag,
            source=source,
        )

    def start_baseline(self, tag: str) -> ServerProcess:
        """Our server running the `--baseline` checkout's code on a claim store its own migrations made."""
        if self.baseline is None or self.baseline_db is None:
            raise RuntimeError("no baseline checkout was given")
        return self.start_ours(f"{tag}-baseline", source=self.baseline, template_db=self.baseline_db)

    def start_reference(self, tag: str) -> ServerProcess:
        chain = self.chain.chain
        return start_reference(
            rpc_url=chain.rpc_url,
            network=chain.network,
            relayer_key=chain.relayer_key,
            workdir=self.workdir,
            tag=tag,
        )

    def segment(
        self, rep: int, servers: Sequence[ServerProcess], label: str, mode: str, concurrency: int, count: int
    ) -> Segment:
        segment = measure_http(
            self.chain,
            servers,
            label=label,
            mode=mode,
            payloads=self.sign(count),
            requirements=self.requirements,
            concurrency=concurrency,
        )
        _progress(_describe(rep, segment))
        return segment

    def verify_pair(self, rep: int, order: Sequence[tuple[str, StartServer]]) -> list[Segment]:
        """Verify sequentially, then concurrently, on both servers in turn (verifying changes no state)."""
        segments = []
        self.chain.reset()
        with ExitStack() as stack:
            servers = []
            for label, start in order:
                server = start(f"{rep}-verify")
                stack.callback(server.stop)
                warm_up([server], self.sign(self.plan.warmup_count), self.requirements)
                servers.append((label, server))
            for concurrency in (1, self.plan.concurrency):
                for label, server in servers:
                    segments.append(
                        self.segment(rep, [server], label, "verify", concurrency, self.plan.verify_count)
                    )
        return segments

    def settle_on_fresh_server(
        self, rep: int, label: str, start: StartServer, concurrency: int, count: int
    ) -> Segment:
        """Settle on a server started on the reset chain (relayers cache their next nonce)."""
        self.chain.reset()
        with _running([start(f"{rep}-settle-{concurrency}")]) as servers:
            warm_up(servers, self.sign(self.plan.warmup_count), self.requirements)
            return self.segment(rep, servers, label, "settle", concurrency, count)

    def two_signers(self, rep: int) -> Segment:
        """The reference as two processes with the same relayer key, sharing the connections evenly."""
        self.chain.reset()
        with ExitStack() as stack:
            servers = []
            for i in range(2):
                server = self.start_reference(f"{rep}-x2-{i}")
                stack.callback(server.stop)
                servers.append(server)
            warm_up(servers, self.sign(self.plan.warmup_count), self.requirements)
            return self.segment(
                rep,
                servers,
                REFERENCE_TWO_SIGNERS,
                "settle",
                self.plan.concurrency,
                self.plan.two_signer_count,
            )

    def node_ceiling(self, rep: int) -> Segment:
        self.chain.reset()
        segment = measure_raw(self.chain, self.sign(self.plan.settle_concurrent_count))
        _progress(_describe(rep, segment))
        return segment

    def http_floor(self, rep: int, hold_s: float) -> Segment:
        """Our HTTP stack's floor: settle bodies POSTed to a trivial uvicorn + Starlette app at c=50, each
        answer held `hold_s` (our settlements' median latency, so that the rate is theirs).

        The app reads and ignores the bodies, so a few signed ones are repeated."""
        payloads = self.sign(self.plan.concurrency)
        with _running([start_http_floor(workdir=self.workdir, tag=str(rep), hold_s=hold_s)]) as servers:
            signed = to_requests(*servers[0].target, "/settle", payloads, self.requirements)
            requests = [signed[i % len(signed)] for i in range(self.plan.floor_count)]
            segment = measure_floor(servers[0], requests, concurrency=self.plan.concurrency)
        _progress(_describe(rep, segment))
        return segment

    def repetition(self, rep: int) -> list[Segment]:
        """One full set of segments. Ours and the reference run back to back for each kind of segment, so
        a ratio compares figures taken seconds apart; which goes first alternates between repetitions. At
        concurrency 50 the node's ceiling runs just before ours, and the baseline (if any) after both."""
        order: list[tuple[str, StartServer]] = [(OURS, self.start_ours), (REFERENCE, self.start_reference)]
        if rep % 2:
            order.reverse()
        segments = self.verify_pair(rep, order)
        settled: dict[tuple[str, int], Segment] = {}
        # The baseline runs only where its target is judged, after the pair it is compared with.
        concurrent = [*order, (BASELINE, self.start_baseline)] if self.baseline else order
        for concurrency, count, servers in (
            (1, self.plan.settle_sequential_count, order),
            (self.plan.concurrency, self.plan.settle_concurrent_count, concurrent),
        ):
            for label, start in servers:
                if (label, concurrency) == (OURS, self.plan.concurrency):
                    # The node share compares figures taken seconds apart, as every ratio here does: the
                    # machine's speed drifts over the minute a repetition takes.
                    segments.insert(0, self.node_ceiling(rep))
                segment = self.settle_on_fresh_server(rep, label, start, concurrency, count)
                settled[label, concurrency] = segment
        segments += settled.values()
        # The floor runs at our concurrent settlements' rate: each answer held for their median latency.
        ours_p50_ms = settled[OURS, self.plan.concurrency].percentile_ms(0.5) or 0.0
        segments.append(self.http_floor(rep, ours_p50_ms / 1000))
        segments.append(self.two_signers(rep))
        return segments


def _header(
    chain: BenchChain,
    plan: Plan,
    started: datetime,
    elapsed_s: float,
    snapshot_height: int,
    load_start: float,
    baseline: Path | None,
) -> list[str]:
    packages = ", ".join(
        f"{name} {version(name)}" for name in ("x402", "web3", "uvicorn", "fastapi", "httpx")
    )
    return [
        f"## Facilitator benchmark, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"anvil {chain.anvil_version()}; {packages}.",
        f"- Chain: anvil automine, chain id {chain.chain.chain_id}, the project's DevUSDC; every segment "
        f"starts from a snapshot at height {snapshot_height} (evm_revert) plus one empty block that sets the "
        "chain's clock to now; start and end heights per segment below.",
        "- Servers: one uvicorn worker each, own process; ours = `x402-facilitator serve` (SQLite claim "
        "store), reference = x402 SDK `x402Facilitator` in a minimal FastAPI app "
        "(`bench/_x402_reference_app.py`).",
        f"- Work: {plan.repetitions} repetition(s); verify N={plan.verify_count}, settle sequential "
        f"N={plan.settle_sequential_count}, settle c={plan.concurrency} N={plan.settle_concurrent_count}, "
        f"two signers N={plan.two_signer_count}; every authorization distinct and pre-signed. "
        f"Load generator: raw asyncio HTTP/1.1 keep-alive client. Run took {elapsed_s:.0f} s.",
        f"- Load average (1 min): {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
        f"(other work on the machine shares its {_cores()} cores).",
        *(
            [
                f"- Baseline: our server on the code of {_commit(baseline)} (`--baseline`), with this "
                "checkout's virtualenv (its libraries' versions above)."
            ]
            if baseline is not None
            else []
        ),
        "- The reference app awaits the SDK's async `x402Facilitator` in `async def` routes, as the SDK's "
        "example does; its EVM scheme makes blocking web3 calls inside, so one request runs at a time and "
        "the event loop stalls meanwhile. That is measured as a user would deploy it, not worked around.",
        "- Figures are medians over repetitions (min–max); a ratio is taken within each repetition, then "
        "its median is shown. CPU columns are milliseconds per request read from /proc.",
    ]


def _commit(checkout: Path) -> str:
    """`checkout`'s commit, as git names it (its path if git cannot say)."""
    found = subprocess.run(  # noqa: S603 - fixed executable, no shell
        ["git", "-C", str(checkout), "describe", "--always", "--dirty"],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    return f"`{found.stdout.strip()}`" if found.returncode == 0 and found.stdout.strip() else str(checkout)


def _cores() -> int:
    """The cores this process may run on (what the benchmark's processes share)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the summary and write it to bench/results/facilitator-latest.md."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.facilitator_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="one small repetition (about a minute)")
    parser.add_argument("--repetitions", type=int, default=None, help="override the number of repetitions")
    parser.add_argument(
        "--output", type=Path, default=RESULTS_PATH, help="where to write the Markdown summary"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="a checkout of an earlier commit: its server settles at concurrency 50 beside ours, for the "
        "CPU comparison in the same run",
    )
    args = parser.parse_args(argv)
    baseline: Path | None = args.baseline.resolve() if args.baseline is not None else None
    if baseline is not None and not any(
        (baseline / where / "__init__.py").is_file() for where in ("a2a_x402/facilitator", "facilitator")
    ):
        parser.error(f"--baseline {args.baseline}: not a checkout of this project (no facilitator package)")
    plan = QUICK if args.quick else FULL
    if args.repetitions is not None:
        plan = dataclasses.replace(plan, repetitions=max(1, args.repetitions))
    started, clock, load_start = datetime.now(UTC), time.monotonic(), os.getloadavg()[0]
    runs: list[list[Segment]] = []
    with (
        tempfile.TemporaryDirectory(prefix="x402-bench-") as workdir,
        start_bench_chain(plan.payers) as chain,
    ):
        snapshot_height = chain.state().height
        runner = _Runner(chain, plan, Path(workdir), baseline)
        for rep in range(plan.repetitions):
            runs.append(runner.repetition(rep))
        header = _header(
            chain, plan, started, time.monotonic() - clock, snapshot_height, load_start, baseline
        )
    report = render_report(runs, concurrency=plan.concurrency, cores=_cores(), header=header)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    _progress(f"written to {args.output}")
    return 0 if targets_met(runs, plan.concurrency) else 1


if __name__ == "__main__":
    sys.exit(main())
