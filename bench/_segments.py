"""One timed segment each: a batch of facilitator requests over HTTP, or raw transactions sent to the node.

A segment starts from the reset chain, times only the requests, and checks its own outcome afterwards:
every answer is read, and for settlements the payee's balance must have grown by exactly the amount
times the successes, and the relayer must have mined exactly one transaction per success (a second
transaction for one authorization would show up here, even though the token refuses to pay it twice).
CPU time of the servers, of anvil and of the load generator is read around the timed part.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import uvloop

from ._chain import BenchChain, ChainState, busiest_thread_s, machine_busy_s, threads_cpu_s
from ._http import Answer, HttpConnection, build_request, run_requests
from ._http_floor_app import SETTLE_SIZED_ANSWER
from ._payloads import EIP3009_KIND, Batch, sign_raw_calls
from ._servers import ServerProcess

__all__ = [
    "BASELINE",
    "HTTP_FLOOR",
    "NODE",
    "OURS",
    "REFERENCE",
    "REFERENCE_TWO_SIGNERS",
    "Segment",
    "measure_floor",
    "measure_http",
    "measure_raw",
    "warm_up",
]

# Who a segment measured; the summary pairs ours with the reference by these labels.
OURS = "ours"
REFERENCE = "reference"
REFERENCE_TWO_SIGNERS = "reference x2"
NODE = "node"
HTTP_FLOOR = "http floor"
BASELINE = "baseline"
"""Our server running an earlier commit's code (`--baseline`), for the CPU comparison in the same run."""

_T = TypeVar("_T")
_RECEIPT_BATCH = 100
_RECEIPT_POLL_S = 0.002


@dataclass(frozen=True, slots=True)
class Segment:
    """The outcome of one timed segment."""

    server: str
    mode: str
    concurrency: int
    count: int
    elapsed_s: float
    ok: int
    failures: Counter[str] = field(default_factory=Counter)
    failure_samples: dict[str, str] = field(default_factory=dict)
    latencies_ms: tuple[float, ...] = ()
    server_cpu_ms: float | None = None
    anvil_cpu_ms: float | None = None
    loadgen_cpu_ms: float | None = None
    # Every core's busy time per request over the segment, whoever used it (other work on a shared VM too).
    machine_cpu_ms: float | None = None
    # The busiest single thread's CPU per request: anvil's, and the server's (its event loop, usually).
    anvil_thread_ms: float | None = None
    server_thread_ms: float | None = None
    server_system_ms: float | None = None
    height_start: int = 0
    height_end: int = 0
    problems: tuple[str, ...] = ()
    kind: str = EIP3009_KIND
    """The settlement kind the segment's payments are (`Batch.kind`)."""

    @property
    def rate(self) -> float:
        """Successful operations per second."""
        return self.ok / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def failed(self) -> int:
        """Operations that did not succeed."""
        return self.count - self.ok

    def percentile_ms(self, fraction: float) -> float | None:
        """A latency percentile in milliseconds (nearest rank), None without latencies."""
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    # uvloop keeps the load generator's own CPU per request low; the servers use it too (uvicorn's default).
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def _per_request_ms(before: float | None, after: float | None, count: int) -> float | None:
    if before is None or after is None or count == 0:
        return None
    return (after - before) * 1000 / count


def _busiest_ms(before: dict[int, float], after: dict[int, float], count: int) -> float | None:
    busiest = busiest_thread_s(before, after)
    return None if busiest is None or count == 0 else busiest * 1000 / count


def _server_threads(servers: Sequence[ServerProcess]) -> dict[int, float]:
    return {tid: cpu for s in servers for tid, cpu in threads_cpu_s(s.process.pid).items()}


def _thread_readings(
    chain: BenchChain, servers: Sequence[ServerProcess]
) -> tuple[dict[int, float], dict[int, float], float | None]:
    """anvil's threads, the servers' threads, and the servers' system time, for the budget's rows."""
    return chain.anvil_threads_cpu_s(), _server_threads(servers), _sum_cpu(servers, system_only=True)


def _sum_cpu(servers: Sequence[ServerProcess], *, system_only: bool = False) -> float | None:
    values = [s.cpu_s(system_only=system_only) for s in servers]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


@dataclass(frozen=True, slots=True)
class _Outcome:
    success: bool
    reason: str = ""
    message: str = ""
    tx_hash: str | None = None


def _outcome(answer: Answer, mode: str) -> _Outcome:
    """What one facilitator answer says: success, or the failure reason and message."""
    if answer.status != 200:
        return _Outcome(False, f"http_{answer.status}", answer.body[:200].decode(errors="replace"))
    body = orjson.loads(answer.body)
    if mode == "verify":
        return _Outcome(
            bool(body.get("isValid")), str(body.get("invalidReason")), str(body.get("invalidMessage"))
        )
    return _Outcome(
        bool(body.get("success")),
        str(body.get("errorReason")),
        str(body.get("errorMessage")),
        body.get("transaction") or None,
    )


def warm_up(servers: Sequence[ServerProcess], batch: Batch) -> None:
    """Send a few untimed verifications to every server, so first-call costs fall outside the timing."""
    for server in servers:
        requests = batch.requests(*server.target, "verify")
        answers, _ = _run(run_requests([server.target], requests, concurrency=1))
        bad = [a for a in answers if not _outcome(a, "verify").success]
        if bad:
            raise RuntimeError(f"{server.name} failed its warm-up: {bad[0].status} {bad[0].body[:300]!r}")


def _settlement_problems(
    before: ChainState, after: ChainState, ok: int, tx_hashes: list[str], charged: int
) -> list[str]:
    problems = []
    received = after.payee_balance - before.payee_balance
    if received != charged * ok:
        problems.append(f"payee balance grew by {received}, expected {charged * ok}")
    mined = after.relayer_nonce - before.relayer_nonce
    if mined != ok:
        problems.append(f"relayer mined {mined} transactions for {ok} successful settlements")
    if len(set(tx_hashes)) != len(tx_hashes):
        problems.append(f"{len(tx_hashes) - len(set(tx_hashes))} transaction hashes answered twice")
    return problems


def measure_http(
    chain: BenchChain,
    servers: Sequence[ServerProcess],
    *,
    label: str,
    mode: str,
    batch: Batch,
    concurrency: int,
) -> Segment:
    """POST every payment of `batch` once to /verify or /settle (`mode`) of `servers` and check the
    outcome: for settlements, on `batch`'s token."""
    requests = batch.requests(*servers[0].target, mode)
    before = chain.state(batch.asset)
    threads = _thread_readings(chain, servers)
    cpu = (_sum_cpu(servers), chain.anvil_cpu_s(), time.process_time(), machine_busy_s())
    answers, elapsed = _run(run_requests([s.target for s in servers], requests, concurrency=concurrency))
    cpu_after = (_sum_cpu(servers), chain.anvil_cpu_s(), time.process_time(), machine_busy_s())
    threads_after = _thread_readings(chain, servers)
    after = chain.state(batch.asset)
    outcomes = [_outcome(a, mode) for a in answers]
    ok = sum(1 for o in outcomes if o.success)
    failures = Counter(o.reason for o in outcomes if not o.success)
    samples: dict[str, str] = {}
    for o in outcomes:
        if not o.success:
            samples.setdefault(o.reason, o.message)
    problems: list[str] = []
    if len(answers) != len(batch):
        problems.append(f"{len(batch) - len(answers)} requests got no answer")
    if mode == "settle":
        hashes = [o.tx_hash for o in outcomes if o.success and o.tx_hash]
        if len(hashes) != ok:
            problems.append(f"{ok - len(hashes)} successful settlements named no transaction")
        problems += _settlement_problems(before, after, ok, hashes, batch.charged)
    elif after.height != before.height:
        problems.append(f"verification changed the chain (height {before.height} -> {after.height})")
    return Segment(
        server=label,
        mode=mode,
        concurrency=concurrency,
        count=len(batch),
        elapsed_s=elapsed,
        ok=ok,
        failures=failures,
        failure_samples=samples,
        latencies_ms=tuple(a.latency_s * 1000 for a in answers),
        server_cpu_ms=_per_request_ms(cpu[0], cpu_after[0], len(batch)),
        anvil_cpu_ms=_per_request_ms(cpu[1], cpu_after[1], len(batch)),
        loadgen_cpu_ms=_per_request_ms(cpu[2], cpu_after[2], len(batch)),
        machine_cpu_ms=_per_request_ms(cpu[3], cpu_after[3], len(batch)),
        anvil_thread_ms=_busiest_ms(threads[0], threads_after[0], len(batch)),
        server_thread_ms=_busiest_ms(threads[1], threads_after[1], len(batch)),
        server_system_ms=_per_request_ms(threads[2], threads_after[2], len(batch)),
        height_start=before.height,
        height_end=after.height,
        problems=tuple(problems),
        kind=batch.kind,
    )


async def _rpc(connection: HttpConnection, body: object) -> Any:
    answer = await connection.send(
        build_request(connection.host, connection.port, "POST", "/", orjson.dumps(body))
    )
    if answer.status != 200:
        raise RuntimeError(f"anvil answered HTTP {answer.status}")
    return orjson.loads(answer.body)


async def _send_and_confirm(
    host: str, port: int, raws: Sequence[str], hashes: Sequence[str]
) -> tuple[float, int]:
    """Send each raw transaction in its own request, then poll receipts in batches until all are mined.

    Returns the wall time and the number of receipts with status 1.
    """
    connection = HttpConnection(host, port)
    await connection.open()
    try:
        started = time.monotonic()
        for i, raw in enumerate(raws):
            reply = await _rpc(
                connection, {"jsonrpc": "2.0", "id": i, "method": "eth_sendRawTransaction", "params": [raw]}
            )
            if "error" in reply:
                raise RuntimeError(f"anvil refused raw transaction {i}: {reply['error']}")
        waiting, succeeded = list(hashes), 0
        while waiting:
            batch = waiting[:_RECEIPT_BATCH]
            replies = await _rpc(
                connection,
                [
                    {"jsonrpc": "2.0", "id": i, "method": "eth_getTransactionReceipt", "params": [h]}
                    for i, h in enumerate(batch)
                ],
            )
            receipts = {r["id"]: r.get("result") for r in replies}
            mined = {i for i, receipt in receipts.items() if receipt is not None}
            succeeded += sum(1 for i in mined if int(receipts[i]["status"], 16) == 1)
            waiting = [h for i, h in enumerate(batch) if i not in mined] + waiting[_RECEIPT_BATCH:]
            if len(mined) < len(batch):
                await asyncio.sleep(_RECEIPT_POLL_S)
        return time.monotonic() - started, succeeded
    finally:
        await connection.close()


def measure_raw(chain: BenchChain, batch: Batch) -> Segment:
    """The node's ceiling: `batch`'s settlements as pre-signed relayer transactions sent straight to anvil
    over one connection."""
    before = chain.state(batch.asset)
    block = chain.chain.rpc.call("eth_getBlockByNumber", ["latest", False])
    first_nonce = int(chain.chain.rpc.call("eth_getTransactionCount", [chain.relayer, "pending"]), 16)
    signed = sign_raw_calls(
        chain.chain, batch.calls, first_nonce=first_nonce, base_fee_wei=int(block["baseFeePerGas"], 16)
    )
    threads = chain.anvil_threads_cpu_s()
    anvil_before, loadgen_before, machine_before = chain.anvil_cpu_s(), time.process_time(), machine_busy_s()
    elapsed, ok = _run(
        _send_and_confirm(*chain.rpc_target, [t.raw for t in signed], [t.tx_hash for t in signed])
    )
    anvil_after, loadgen_after, machine_after = chain.anvil_cpu_s(), time.process_time(), machine_busy_s()
    threads_after = chain.anvil_threads_cpu_s()
    after = chain.state(batch.asset)
    return Segment(
        server=NODE,
        mode="raw",
        concurrency=1,
        count=len(batch),
        elapsed_s=elapsed,
        ok=ok,
        failures=Counter({"reverted": len(batch) - ok}) if ok < len(batch) else Counter(),
        anvil_cpu_ms=_per_request_ms(anvil_before, anvil_after, len(batch)),
        loadgen_cpu_ms=_per_request_ms(loadgen_before, loadgen_after, len(batch)),
        machine_cpu_ms=_per_request_ms(machine_before, machine_after, len(batch)),
        anvil_thread_ms=_busiest_ms(threads, threads_after, len(batch)),
        height_start=before.height,
        height_end=after.height,
        problems=tuple(_settlement_problems(before, after, ok, [t.tx_hash for t in signed], batch.charged)),
        kind=batch.kind,
    )


def measure_floor(server: ServerProcess, requests: Sequence[bytes], *, concurrency: int) -> Segment:
    """The HTTP floor: `requests` (settle bodies) to the trivial app of ``bench._http_floor_app``.

    A first pass of a tenth of them is untimed, like a facilitator's warm-up. Every answer must be 200
    with the app's fixed body.
    """
    _run(run_requests([server.target], requests[: max(1, len(requests) // 10)], concurrency=concurrency))
    threads, system = _server_threads([server]), server.cpu_s(system_only=True)
    cpu = (server.cpu_s(), time.process_time(), machine_busy_s())
    answers, elapsed = _run(run_requests([server.target], requests, concurrency=concurrency))
    cpu_after = (server.cpu_s(), time.process_time(), machine_busy_s())
    threads_after, system_after = _server_threads([server]), server.cpu_s(system_only=True)
    ok = sum(1 for a in answers if a.status == 200 and a.body == SETTLE_SIZED_ANSWER)
    problems = [] if len(answers) == len(requests) else [f"{len(requests) - len(answers)} got no answer"]
    return Segment(
        server=HTTP_FLOOR,
        mode="floor",
        concurrency=concurrency,
        count=len(requests),
        elapsed_s=elapsed,
        ok=ok,
        failures=Counter({"wrong answer": len(answers) - ok}) if ok < len(answers) else Counter(),
        latencies_ms=tuple(a.latency_s * 1000 for a in answers),
        server_cpu_ms=_per_request_ms(cpu[0], cpu_after[0], len(requests)),
        loadgen_cpu_ms=_per_request_ms(cpu[1], cpu_after[1], len(requests)),
        machine_cpu_ms=_per_request_ms(cpu[2], cpu_after[2], len(requests)),
        server_thread_ms=_busiest_ms(threads, threads_after, len(requests)),
        server_system_ms=_per_request_ms(system, system_after, len(requests)),
        problems=tuple(problems),
    )
