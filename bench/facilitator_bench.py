"""Facilitator throughput: ours beside the x402 Python SDK's, on one anvil chain with the project's tokens.

Run ``python -m bench.facilitator_bench`` (about four minutes on two cores for `exact` by EIP-3009, as much
again for the Permit2 kinds) or with ``--quick`` (about a minute on a quiet machine, one small
repetition). Each repetition measures, every segment from the same reset chain:

* the node's ceiling: pre-signed ``transferWithAuthorization`` transactions sent straight to anvil, just
  before our settlements at concurrency 50 (the node share compares the two);
* for ours (``x402-facilitator serve``) and the reference (``bench._x402_reference_app``), one uvicorn
  worker each, back to back: verifications sequentially and at concurrency 50, then settlements
  sequentially and at concurrency 50, each settlement segment on a freshly started server;
* the reference with two signers sharing one relayer key (two processes), settling at concurrency 50;
* issue 29's kinds beside `exact` by EIP-3009 (``--kinds``, all by default): `exact` by Permit2 and `upto`
  settled for 60 % of its maximum, on a plain ERC-20 the payers approved Permit2 for in the setup
  (``bench._kinds``): for each, settlements sequentially and at concurrency 50 on ours and the reference,
  paired and alternated the same way, and the node's ceiling for that kind just before ours at 50;
* with ``--baseline DIR`` (a checkout of an earlier commit, e.g. ``git worktree add --detach ../base
  ef70152``), our server running that checkout's code, settling at concurrency 50 beside ours: issue 15's
  "half the server CPU per settlement" is a comparison in the same run;
* the floor of our HTTP stack: uvicorn and Starlette answering a trivial POST of a settle body at
  concurrency 50 (``bench._http_floor_app``), for the CPU budget of the node-share target (``bench._budget``).

Each settlement segment checks that every answer succeeded, that the payee received exactly what the kind
charges times the successes, and that the relayer mined one transaction per success. The summary goes to
stdout and to ``bench/results/facilitator-latest.md``; the exit status is 1 when a target is missed or one
of our segments failed a check.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from ._chain import BenchChain, start_bench_chain
from ._kinds import KIND_NAMES, PERMIT2_KINDS, Permit2Batches, prepare_payers
from ._payloads import EIP3009_KIND, Batch, eip3009_batch, make_requirements, sign_payloads
from ._plan import FULL, QUICK, Plan, cores, header
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

__all__ = ["FULL", "QUICK", "Plan", "Runner", "main"]

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "facilitator-latest.md"


StartServer = Callable[[str], ServerProcess]
Sign = Callable[[int], Batch]


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _describe(rep: int, segment: Segment) -> str:
    checks = "checks ok" if not segment.problems else "; ".join(segment.problems)
    return (
        f"rep {rep + 1}: {segment.kind:<24} {segment.server:<12} {segment.mode:<6} "
        f"c={segment.concurrency:<3} {segment.rate:8.1f}/s  {segment.failed} failed of {segment.count}  "
        f"height {segment.height_start}->{segment.height_end}  {checks}"
    )


@contextmanager
def _running(servers: Sequence[ServerProcess]) -> Iterator[Sequence[ServerProcess]]:
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


class Runner:
    """Runs the segments of a plan on one chain and collects them per repetition."""

    def __init__(
        self,
        chain: BenchChain,
        plan: Plan,
        workdir: Path,
        baseline: Path | None = None,
        kinds: Sequence[str] = tuple(KIND_NAMES.values()),
    ) -> None:
        self.chain = chain
        self.plan = plan
        self.workdir = workdir
        self.requirements = make_requirements(chain.chain, chain.pay_to)
        self.template_db = migrate_claim_store(workdir)
        self.baseline = baseline
        self.baseline_db = migrate_claim_store(workdir, source=baseline, tag="baseline") if baseline else None
        self.eip3009 = EIP3009_KIND in kinds
        self.permit2 = [
            Permit2Batches(chain.chain, kind, pay_to=chain.pay_to, payer_keys=chain.chain.payer_keys)
            for kind in PERMIT2_KINDS
            if kind.label in kinds
        ]
        if self.permit2:
            # Before the snapshot every segment starts from, so each finds the allowances in place.
            prepare_payers(chain.chain, chain.chain.payer_keys)
            chain.take_snapshot()

    def sign(self, count: int) -> Batch:
        payloads = sign_payloads(self.chain.chain.payer_keys, self.requirements, count)
        return eip3009_batch(self.chain.chain, payloads, self.requirements)

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
        self,
        rep: int,
        servers: Sequence[ServerProcess],
        label: str,
        mode: str,
        concurrency: int,
        batch: Batch,
    ) -> Segment:
        segment = measure_http(
            self.chain, servers, label=label, mode=mode, batch=batch, concurrency=concurrency
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
                warm_up([server], self.sign(self.plan.warmup_count))
                servers.append((label, server))
            for concurrency in (1, self.plan.concurrency):
                for label, server in servers:
                    batch = self.sign(self.plan.verify_count)
                    segments.append(self.segment(rep, [server], label, "verify", concurrency, batch))
        return segments

    def settle_on_fresh_server(
        self, rep: int, label: str, start: StartServer, concurrency: int, count: int, sign: Sign | None = None
    ) -> Segment:
        """Settle `count` payments signed by `sign` (EIP-3009 ones by default) on a server started on the
        reset chain (relayers cache their next nonce)."""
        sign = sign or self.sign
        self.chain.reset()
        with _running([start(f"{rep}-settle-{concurrency}")]) as servers:
            warm_up(servers, sign(self.plan.warmup_count))
            return self.segment(rep, servers, label, "settle", concurrency, sign(count))

    def two_signers(self, rep: int) -> Segment:
        """The reference as two processes with the same relayer key, sharing the connections evenly."""
        self.chain.reset()
        with ExitStack() as stack:
            servers = []
            for i in range(2):
                server = self.start_reference(f"{rep}-x2-{i}")
                stack.callback(server.stop)
                servers.append(server)
            warm_up(servers, self.sign(self.plan.warmup_count))
            batch = self.sign(self.plan.two_signer_count)
            return self.segment(rep, servers, REFERENCE_TWO_SIGNERS, "settle", self.plan.concurrency, batch)

    def node_ceiling(self, rep: int, sign: Sign | None = None, count: int | None = None) -> Segment:
        """The node's ceiling for `count` payments signed by `sign` (by default EIP-3009 ones, as many as
        the settlements at concurrency 50)."""
        self.chain.reset()
        batch = (sign or self.sign)(count or self.plan.settle_concurrent_count)
        segment = measure_raw(self.chain, batch)
        _progress(_describe(rep, segment))
        return segment

    def http_floor(self, rep: int, hold_s: float) -> Segment:
        """Our HTTP stack's floor: settle bodies POSTed to a trivial uvicorn + Starlette app at c=50, each
        answer held `hold_s` (our settlements' median latency, so that the rate is theirs).

        The app reads and ignores the bodies, so a few signed ones are repeated."""
        batch = self.sign(self.plan.concurrency)
        with _running([start_http_floor(workdir=self.workdir, tag=str(rep), hold_s=hold_s)]) as servers:
            signed = batch.requests(*servers[0].target, "settle")
            requests = [signed[i % len(signed)] for i in range(self.plan.floor_count)]
            segment = measure_floor(servers[0], requests, concurrency=self.plan.concurrency)
        _progress(_describe(rep, segment))
        return segment

    def repetition(self, rep: int) -> list[Segment]:
        """One full set of segments. Ours and the reference run back to back for each kind of segment, so
        a ratio compares figures taken seconds apart; which goes first alternates between repetitions. At
        concurrency 50 the node's ceiling runs just before ours, and the baseline (if any) after both.
        The Permit2 kinds follow `exact` by EIP-3009, each with the same pairing."""
        order: list[tuple[str, StartServer]] = [(OURS, self.start_ours), (REFERENCE, self.start_reference)]
        if rep % 2:
            order.reverse()
        segments = self.eip3009_segments(rep, order) if self.eip3009 else []
        for batches in self.permit2:
            segments += self.kind_segments(rep, order, batches)
        return segments

    def kind_segments(
        self, rep: int, order: Sequence[tuple[str, StartServer]], batches: Permit2Batches
    ) -> list[Segment]:
        """One Permit2 kind's settlements, sequentially then at concurrency 50, ours and the reference in
        `order`, the node's ceiling for the kind just before ours at 50."""
        segments = []
        for concurrency, count in (
            (1, self.plan.kind_sequential_count),
            (self.plan.concurrency, self.plan.kind_concurrent_count),
        ):
            for label, start in order:
                if (label, concurrency) == (OURS, self.plan.concurrency):
                    segments.append(self.node_ceiling(rep, batches.sign, count))
                segments.append(
                    self.settle_on_fresh_server(rep, label, start, concurrency, count, batches.sign)
                )
        return segments

    def eip3009_segments(self, rep: int, order: Sequence[tuple[str, StartServer]]) -> list[Segment]:
        """`exact` by EIP-3009: verifications, settlements, the HTTP floor and the reference with two
        signers (issue 15's targets are judged on these)."""
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
    parser.add_argument(
        "--kinds",
        default=",".join(KIND_NAMES),
        help=f"the settlement kinds to measure, comma-separated, of {', '.join(KIND_NAMES)} (default: all)",
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.kinds.split(",") if name.strip()]
    unknown = sorted(set(names) - set(KIND_NAMES))
    if unknown or not names:
        parser.error(f"--kinds {args.kinds}: name one or more of {', '.join(KIND_NAMES)}")
    kinds = [KIND_NAMES[name] for name in names]
    baseline: Path | None = args.baseline.resolve() if args.baseline is not None else None
    if baseline is not None and not any(
        (baseline / where / "__init__.py").is_file() for where in ("a2a_x402/facilitator", "facilitator")
    ):
        parser.error(f"--baseline {args.baseline}: not a checkout of this project (no facilitator package)")
    if baseline is not None and EIP3009_KIND not in kinds:
        parser.error("--baseline compares settlements by EIP-3009: add eip3009 to --kinds")
    plan = QUICK if args.quick else FULL
    if args.repetitions is not None:
        plan = dataclasses.replace(plan, repetitions=max(1, args.repetitions))
    started, clock, load_start = datetime.now(UTC), time.monotonic(), os.getloadavg()[0]
    runs: list[list[Segment]] = []
    with (
        tempfile.TemporaryDirectory(prefix="x402-bench-") as workdir,
        start_bench_chain(plan.payers) as chain,
    ):
        runner = Runner(chain, plan, Path(workdir), baseline, kinds)
        snapshot_height = chain.state().height
        for rep in range(plan.repetitions):
            runs.append(runner.repetition(rep))
        top = header(
            chain, plan, started, time.monotonic() - clock, snapshot_height, load_start, baseline, kinds
        )
    report = render_report(runs, concurrency=plan.concurrency, cores=cores(), header=top)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    _progress(f"written to {args.output}")
    return 0 if targets_met(runs, plan.concurrency) else 1


if __name__ == "__main__":
    sys.exit(main())
