"""The merchant benchmark's load: two-round-trip A2A flows over JSON-RPC; the node's settlement round trip.

One flow is what a paying client does for one task: ``SendMessage`` with the request (answered with
``TASK_STATE_INPUT_REQUIRED``), then ``SendMessage`` on that task with the follow-up (answered with
``TASK_STATE_COMPLETED`` and the artifact). On the merchant the answer to the first message carries the
payment terms and the follow-up carries the authorization signed for them. Each offer has its own
``extra.offerId``, so an authorization cannot be signed before its offer arrives: the client signs between
the two round trips, and that CPU is measured (thread CPU time around reading the terms and
``payer.sign_payment``) and reported.
The bare flow sends the same messages without the payment.

The first messages are serialised before the clock starts; the follow-ups can only be built from the
first answers. Requests go over the raw keep-alive client of ``bench._http`` (httpx would cost the client
as much CPU as the servers use, perf-baselines finding 8). A flow's latency runs from sending the first
request to reading the second answer, the client's signing included.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

import orjson
import uvloop

from a2a_x402.extension import EXTENSION_URI
from a2a_x402.facilitator.wire import PaymentRequired
from a2a_x402.merchant.edge import JSONRPC_PATH
from a2a_x402.payer import sign_payment

from ._chain import BenchChain
from ._http import Answer, HttpConnection, HttpError, build_request
from ._payloads import make_requirements, sign_payloads, sign_raw_transfers
from ._servers import ServerProcess

__all__ = [
    "DatabaseMeter",
    "FlowKind",
    "FlowOutcome",
    "FlowSegment",
    "SegmentProbe",
    "measure_settlement_round_trips",
    "percentile",
    "run_flows",
]

_T = TypeVar("_T")
# The text the merchant's text-stats skill analyses; the bare flow sends it again in its follow-up, so both
# flows do the same work on the same input.
_REQUEST_TEXT = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs off into the woods."
)
_HEADERS = {"A2A-Version": "1.0", "A2A-Extensions": EXTENSION_URI}
_RECEIPT_POLL_S = 0.0005


class FlowKind(StrEnum):
    """Which server a flow runs against, and so what its follow-up carries."""

    PAID = "paid"
    BARE = "bare"


@dataclass(frozen=True, slots=True)
class FlowOutcome:
    """One flow: success or the failure reason, the round trips' wall times and the signing CPU."""

    ok: bool
    reason: str = ""
    message: str = ""
    latency_s: float = 0.0
    first_s: float = 0.0
    second_s: float = 0.0
    sign_cpu_s: float = 0.0


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of `values`, None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


@dataclass(frozen=True, slots=True)
class FlowSegment:
    """One timed segment of flows, with its CPU use and its correctness findings."""

    backend: str
    kind: str
    concurrency: int
    count: int
    elapsed_s: float
    outcomes: tuple[FlowOutcome, ...]
    server_cpu_ms: float | None = None
    db_cpu_ms: float | None = None
    anvil_cpu_ms: float | None = None
    loadgen_cpu_ms: float | None = None
    height_start: int = 0
    height_end: int = 0
    problems: tuple[str, ...] = ()
    failures: Counter[str] = field(default_factory=Counter)
    failure_samples: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> int:
        """Flows that ended in TASK_STATE_COMPLETED with everything the checks expect."""
        return sum(1 for o in self.outcomes if o.ok)

    @property
    def rate(self) -> float:
        """Completed tasks per second."""
        return self.ok / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def latency_ms(self, fraction: float) -> float | None:
        """A percentile of the completed flows' latency, in milliseconds."""
        return _ms(percentile([o.latency_s for o in self.outcomes if o.ok], fraction))

    def first_ms(self, fraction: float) -> float | None:
        """A percentile of the first round trip (request → input required), in milliseconds."""
        return _ms(percentile([o.first_s for o in self.outcomes if o.ok], fraction))

    def second_ms(self, fraction: float) -> float | None:
        """A percentile of the second round trip (follow-up → completed), in milliseconds."""
        return _ms(percentile([o.second_s for o in self.outcomes if o.ok], fraction))

    @property
    def sign_cpu_ms(self) -> float | None:
        """The client's signing CPU per flow, in milliseconds (None for flows that sign nothing)."""
        signed = [o.sign_cpu_s for o in self.outcomes if o.sign_cpu_s > 0]
        return sum(signed) * 1000 / len(signed) if signed else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _run_loop(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run `coroutine` on a fresh uvloop loop, which keeps the load generator's CPU per request low."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def _send_message(host: str, port: int, request_id: int, message: dict[str, Any]) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "SendMessage", "params": {"message": message}}
    return build_request(host, port, "POST", JSONRPC_PATH, orjson.dumps(body), _HEADERS)


def _first_requests(target: tuple[str, int], count: int) -> list[bytes]:
    """`count` first messages, each with its own message id, serialised for `target`."""
    return [
        _send_message(
            *target,
            index,
            {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": _REQUEST_TEXT}]},
        )
        for index in range(count)
    ]


class _FlowFailure(Exception):
    """A flow did not go as expected; `reason` is short and countable, the message says more."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


def _task_of(answer: Answer, expected_state: str) -> dict[str, Any]:
    """The task in a JSON-RPC SendMessage answer, checked to be in `expected_state`."""
    if answer.status != 200:
        raise _FlowFailure(f"http_{answer.status}", answer.body[:300].decode(errors="replace"))
    body = orjson.loads(answer.body)
    if "error" in body:
        error = body["error"]
        raise _FlowFailure(f"rpc_{error.get('code')}", str(error.get("message")))
    task = body.get("result", {}).get("task")
    if not isinstance(task, dict):
        raise _FlowFailure("no_task", answer.body[:300].decode(errors="replace"))
    state = task.get("status", {}).get("state")
    if state != expected_state:
        raise _FlowFailure(f"state_{state}", orjson.dumps(task.get("status", {})).decode()[:300])
    return task


def _extension_data(task: dict[str, Any]) -> dict[str, Any]:
    data = task.get("status", {}).get("message", {}).get("metadata", {}).get(EXTENSION_URI)
    if not isinstance(data, dict):
        raise _FlowFailure("no_payment_metadata")
    return data


@dataclass(frozen=True, slots=True)
class _FlowClient:
    """Builds the follow-ups of one kind of flow and checks its final answers."""

    kind: FlowKind
    target: tuple[str, int]
    payer_keys: Sequence[str]

    def follow_up(self, index: int, task: dict[str, Any]) -> tuple[bytes, float]:
        """The follow-up request for the task in `task`, and the thread CPU seconds spent reading the
        terms and signing the authorization (none for the bare flow)."""
        message: dict[str, Any] = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "taskId": task["id"],
            "contextId": task["contextId"],
        }
        if self.kind is FlowKind.BARE:
            message["parts"] = [{"text": _REQUEST_TEXT}]
            return _send_message(*self.target, index, message), 0.0
        data = _extension_data(task)
        if data.get("status") != "payment-required":
            raise _FlowFailure(f"terms_{data.get('status')}")
        started = time.thread_time()
        terms = PaymentRequired.from_wire(data["required"])
        payload = sign_payment(self.payer_keys[index % len(self.payer_keys)], terms.accepts[0])
        signing = time.thread_time() - started
        message["parts"] = [{"text": "Paying for the task."}]
        message["extensions"] = [EXTENSION_URI]
        message["metadata"] = {
            EXTENSION_URI: {"status": "payment-submitted", "payload": payload.to_json_dict()}
        }
        return _send_message(*self.target, index, message), signing

    def check_final(self, task: dict[str, Any]) -> None:
        """A completed task must carry its artifact and, when paid, the payment-completed receipts."""
        if not task.get("artifacts"):
            raise _FlowFailure("no_artifact")
        if self.kind is FlowKind.PAID:
            data = _extension_data(task)
            if data.get("status") != "payment-completed" or not data.get("receipts"):
                raise _FlowFailure(f"final_{data.get('status')}")


async def _one_flow(
    client: _FlowClient, connection: HttpConnection, index: int, first_request: bytes
) -> FlowOutcome:
    # The client's own work between the round trips (parse, sign, serialise) is part of the flow's latency.
    started = time.monotonic()
    try:
        first = await connection.send(first_request)
        task = _task_of(first, "TASK_STATE_INPUT_REQUIRED")
        request, signing = client.follow_up(index, task)
        second = await connection.send(request)
        client.check_final(_task_of(second, "TASK_STATE_COMPLETED"))
    except _FlowFailure as failure:
        return FlowOutcome(False, failure.reason, str(failure))
    except (HttpError, OSError, EOFError, TimeoutError, ValueError, KeyError) as exc:
        # A broken connection or an unreadable answer fails this flow; the next one reconnects.
        await connection.close()
        return FlowOutcome(False, type(exc).__name__, str(exc)[:300])
    return FlowOutcome(
        True,
        latency_s=time.monotonic() - started,
        first_s=first.latency_s,
        second_s=second.latency_s,
        sign_cpu_s=signing,
    )


async def _run(
    client: _FlowClient, requests: Sequence[bytes], concurrency: int
) -> tuple[list[FlowOutcome], float]:
    connections = [HttpConnection(*client.target) for _ in range(concurrency)]
    await asyncio.gather(*(c.open() for c in connections))
    outcomes: list[FlowOutcome | None] = [None] * len(requests)
    pending = iter(range(len(requests)))

    async def worker(connection: HttpConnection) -> None:
        for index in pending:
            outcomes[index] = await _one_flow(client, connection, index, requests[index])

    started = time.monotonic()
    try:
        await asyncio.gather(*(worker(c) for c in connections))
        elapsed = time.monotonic() - started
    finally:
        await asyncio.gather(*(c.close() for c in connections))
    return [o for o in outcomes if o is not None], elapsed


DatabaseMeter = Callable[[], dict[int, float] | None]
"""CPU seconds so far of each database backend serving the segment, by pid (None: not measurable)."""


@dataclass(frozen=True, slots=True)
class SegmentProbe:
    """CPU meters read around a segment: the server, anvil, the load generator and the database server."""

    server: ServerProcess
    chain: BenchChain
    database: DatabaseMeter | None = None

    def read(self) -> tuple[float | None, float | None, float]:
        """(server, anvil, load generator) CPU seconds so far."""
        return self.server.cpu_s(), self.chain.anvil_cpu_s(), time.process_time()


def _per_flow_ms(before: float | None, after: float | None, count: int) -> float | None:
    if before is None or after is None or count == 0:
        return None
    return (after - before) * 1000 / count


def _database_ms(before: dict[int, float] | None, after: dict[int, float] | None, count: int) -> float | None:
    """Database CPU per flow: what each process used meanwhile; a process new since `before` counts whole
    (pooled connections opened during the segment), one that exited meanwhile is lost (rare with pools)."""
    if before is None or after is None or count == 0:
        return None
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()) * 1000 / count


def run_flows(
    probe: SegmentProbe,
    *,
    backend: str,
    kind: FlowKind,
    payer_keys: Sequence[str],
    concurrency: int,
    count: int,
) -> FlowSegment:
    """Run `count` flows of `kind` against the probe's server over `concurrency` connections.

    The returned segment has no chain or ledger findings yet: the caller checks those, since it knows
    the states before and after.
    """
    client = _FlowClient(kind, probe.server.target, payer_keys)
    requests = _first_requests(probe.server.target, count)
    database_before = probe.database() if probe.database is not None else None
    before = probe.read()
    outcomes, elapsed = _run_loop(_run(client, requests, concurrency))
    after = probe.read()
    database_after = probe.database() if probe.database is not None else None
    failures = Counter(o.reason for o in outcomes if not o.ok)
    samples: dict[str, str] = {}
    for outcome in outcomes:
        if not outcome.ok:
            samples.setdefault(outcome.reason, outcome.message)
    cpu = [_per_flow_ms(b, a, len(outcomes)) for b, a in zip(before, after, strict=True)]
    return FlowSegment(
        backend=backend,
        kind=kind.value,
        concurrency=concurrency,
        count=count,
        elapsed_s=elapsed,
        outcomes=tuple(outcomes),
        server_cpu_ms=cpu[0],
        db_cpu_ms=_database_ms(database_before, database_after, len(outcomes)),
        anvil_cpu_ms=cpu[1],
        loadgen_cpu_ms=cpu[2],
        failures=failures,
        failure_samples=samples,
    )


async def _rpc(connection: HttpConnection, method: str, params: list[Any]) -> Any:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    answer = await connection.send(build_request(connection.host, connection.port, "POST", "/", body))
    reply = orjson.loads(answer.body)
    if answer.status != 200 or "error" in reply:
        raise RuntimeError(f"anvil refused {method}: {answer.status} {reply.get('error')}")
    return reply["result"]


async def _round_trips(target: tuple[str, int], raws: Sequence[str], hashes: Sequence[str]) -> list[float]:
    connection = HttpConnection(*target)
    await connection.open()
    times = []
    try:
        for raw, tx_hash in zip(raws, hashes, strict=True):
            started = time.monotonic()
            await _rpc(connection, "eth_sendRawTransaction", [raw])
            receipt = await _rpc(connection, "eth_getTransactionReceipt", [tx_hash])
            while receipt is None:
                await asyncio.sleep(_RECEIPT_POLL_S)  # anvil has no push for receipts over HTTP
                receipt = await _rpc(connection, "eth_getTransactionReceipt", [tx_hash])
            times.append(time.monotonic() - started)
            if int(receipt["status"], 16) != 1:
                raise RuntimeError(f"transaction {tx_hash} reverted")
    finally:
        await connection.close()
    return times


def measure_settlement_round_trips(chain: BenchChain, count: int) -> list[float]:
    """Seconds from ``eth_sendRawTransaction`` of a pre-signed settlement to its receipt, one at a time.

    Each transaction is a real ``transferWithAuthorization`` of the bench amount from a payer to the
    payee, sent by the merchant's relayer: what one settlement asks of the node, without the merchant.
    The receipt is polled every half millisecond.
    """
    requirements = make_requirements(chain.chain, chain.pay_to)
    payloads = sign_payloads(chain.chain.payer_keys, requirements, count)
    block = chain.chain.rpc.call("eth_getBlockByNumber", ["latest", False])
    first_nonce = int(chain.chain.rpc.call("eth_getTransactionCount", [chain.relayer, "pending"]), 16)
    signed = sign_raw_transfers(
        chain.chain, payloads, first_nonce=first_nonce, base_fee_wei=int(block["baseFeePerGas"], 16)
    )
    return _run_loop(_round_trips(chain.rpc_target, [t.raw for t in signed], [t.tx_hash for t in signed]))
