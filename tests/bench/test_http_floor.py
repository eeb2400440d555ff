"""The HTTP floor of the facilitator benchmark: the trivial app under uvicorn, held answers, and the
segment that measures it."""

from __future__ import annotations

from pathlib import Path

from bench._http import build_request
from bench._http_floor_app import SETTLE_SIZED_ANSWER
from bench._segments import HTTP_FLOOR, measure_floor
from bench._servers import start_http_floor

_BODY = b'{"x402Version":2,"paymentPayload":{"payload":"' + b"x" * 900 + b'"}}'


def test_the_floor_answers_every_post_with_a_settle_sized_body_after_the_hold(tmp_path: Path) -> None:
    server = start_http_floor(workdir=tmp_path, tag="test", hold_s=0.05)
    try:
        requests = [build_request(*server.target, "POST", "/settle", _BODY)] * 40
        segment = measure_floor(server, requests, concurrency=5)
    finally:
        server.stop()
    assert (segment.server, segment.mode, segment.concurrency) == (HTTP_FLOOR, "floor", 5)
    assert segment.ok == 40 and not segment.failures and not segment.problems
    # Held 50 ms (the event loop's timer may fire a fraction early); unheld answers take about 1 ms.
    assert min(segment.latencies_ms) >= 45
    assert segment.server_cpu_ms is not None and segment.server_thread_ms is not None
    assert segment.server_thread_ms <= segment.server_cpu_ms + 0.3  # one thread holds no more than all
    assert len(SETTLE_SIZED_ANSWER) > 150  # a settlement's fields at their real lengths


def test_a_wrong_answer_is_counted_as_a_failure(tmp_path: Path) -> None:
    server = start_http_floor(workdir=tmp_path, tag="wrong", hold_s=0.0)
    try:
        requests = [build_request(*server.target, "POST", "/nowhere", _BODY)] * 10
        segment = measure_floor(server, requests, concurrency=2)
    finally:
        server.stop()
    assert segment.ok == 0
    assert segment.failures["wrong answer"] == 10
