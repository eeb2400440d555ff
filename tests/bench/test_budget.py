"""The facilitator benchmark's CPU budget: the arithmetic of the node-share target, which segments it
reads, its verdicts, and the machine-wide CPU reading it rests on."""

from __future__ import annotations

import os
import time

import pytest

from bench._budget import Budget, budgets, render_budget
from bench._chain import machine_busy_s, process_cpu_s
from bench._segments import HTTP_FLOOR, NODE, OURS, REFERENCE, Segment


def _segment(
    server: str,
    mode: str,
    concurrency: int,
    *,
    rate: float = 100.0,
    anvil_cpu_ms: float | None = None,
    server_cpu_ms: float | None = None,
    loadgen_cpu_ms: float | None = None,
    machine_cpu_ms: float | None = None,
) -> Segment:
    count = 1000
    return Segment(
        server,
        mode,
        concurrency,
        count,
        elapsed_s=count / rate,
        ok=count,
        anvil_cpu_ms=anvil_cpu_ms,
        server_cpu_ms=server_cpu_ms,
        loadgen_cpu_ms=loadgen_cpu_ms,
        machine_cpu_ms=machine_cpu_ms,
    )


def _run(
    *, ceiling: float, anvil: float, loadgen: float, server: float, floor: float | None
) -> list[Segment]:
    run = [
        _segment(NODE, "raw", 1, rate=ceiling, anvil_cpu_ms=0.4, loadgen_cpu_ms=0.1),
        _segment(OURS, "settle", 1, anvil_cpu_ms=9.0, server_cpu_ms=9.0, loadgen_cpu_ms=9.0),
        _segment(REFERENCE, "settle", 50, anvil_cpu_ms=9.0, server_cpu_ms=9.0, loadgen_cpu_ms=9.0),
        _segment(
            OURS,
            "settle",
            50,
            anvil_cpu_ms=anvil,
            server_cpu_ms=server,
            loadgen_cpu_ms=loadgen,
            machine_cpu_ms=anvil + server + loadgen + 0.5,
        ),
    ]
    if floor is not None:
        run.append(_segment(HTTP_FLOOR, "floor", 50, server_cpu_ms=floor, loadgen_cpu_ms=0.2))
    return run


def test_the_allowance_is_the_cores_time_at_the_target_rate() -> None:
    budget = Budget(cores=2, share=0.75, ceiling_per_s=1000.0, anvil_ms=1.0, loadgen_ms=0.2, server_ms=1.5)
    assert budget.allowed_ms == pytest.approx(2000 / 750)
    assert budget.one_core_ms == pytest.approx(1000 / 750)
    assert budget.left_ms == pytest.approx(2000 / 750 - 1.2)
    assert budget.server_bound_ms == pytest.approx(1000 / 750)  # one core is the tighter bound here


def test_budgets_read_the_ceiling_our_concurrent_settlements_and_the_floor() -> None:
    run = _run(ceiling=1500.0, anvil=1.2, loadgen=0.25, server=1.45, floor=0.6)
    found = budgets([run], concurrency=50, cores=2, share=0.75)
    assert len(found) == 1
    budget = found[0]
    assert (budget.ceiling_per_s, budget.anvil_ms, budget.loadgen_ms, budget.server_ms) == pytest.approx(
        (1500.0, 1.2, 0.25, 1.45)
    )
    assert budget.anvil_ceiling_ms == pytest.approx(0.4)
    assert budget.floor_ms == pytest.approx(0.6)
    assert budget.others_ms == pytest.approx(0.5)


def test_a_repetition_without_the_ceiling_or_cpu_figures_has_no_budget() -> None:
    full = _run(ceiling=1500.0, anvil=1.2, loadgen=0.25, server=1.45, floor=0.6)
    run = [s for s in full if s.server != NODE]
    assert budgets([run], concurrency=50, cores=2, share=0.75) == []


@pytest.mark.parametrize(
    ("server", "floor", "expected"),
    [
        (0.5, 0.4, "fits"),  # 2000/750 - 1.0 - 0.2 = 1.47 left, one core 1.33: 0.5 fits
        (1.5, 0.6, "needs the server at ≤ 1.33 ms"),
        (1.5, 1.4, "out of reach: the HTTP floor alone (1.40 ms)"),
    ],
)
def test_the_verdict_compares_the_server_and_its_floor_with_what_is_left(
    server: float, floor: float, expected: str
) -> None:
    budget = Budget(2, 0.75, 1000.0, anvil_ms=1.0, loadgen_ms=0.2, server_ms=server, floor_ms=floor)
    assert budget.verdict().startswith(expected)


def test_the_busiest_threads_give_the_rates_they_allow() -> None:
    costs = {"anvil_ms": 1.0, "loadgen_ms": 0.1, "server_ms": 1.3}
    budget = Budget(2, 0.75, 1600.0, **costs, anvil_thread_ms=0.8, server_thread_ms=1.25)
    assert budget.thread_caps() == (
        "busiest threads, if their work is serial, cap settlements at "
        "anvil's 1,250/s (78% of the ceiling) and the server's 800/s (50% of the ceiling)"
    )
    assert Budget(2, 0.75, 1600.0, **costs).thread_caps() == ""


def test_anvil_and_the_load_generator_alone_can_use_the_whole_budget() -> None:
    budget = Budget(cores=2, share=0.75, ceiling_per_s=2000.0, anvil_ms=1.2, loadgen_ms=0.3, server_ms=1.0)
    assert budget.left_ms < 0
    assert budget.verdict().startswith("out of reach: anvil and the load generator")


def test_the_rendering_shows_every_part_and_a_verdict_per_repetition() -> None:
    runs = [
        _run(ceiling=1500.0, anvil=1.2, loadgen=0.25, server=1.45, floor=0.6),
        _run(ceiling=1600.0, anvil=1.1, loadgen=0.2, server=1.35, floor=None),
    ]
    lines = render_budget(budgets(runs, concurrency=50, cores=2, share=0.75), concurrency=50)
    text = "\n".join(lines)
    assert "2 cores; ceiling 1,550 (1,500–1,600) raw tx/s" in text
    assert "| **server, measured** (settle c=50) | 1.40 (1.35–1.45) |" in text
    assert "| HTTP floor: uvicorn + Starlette, trivial POST, same body, c=50 | 0.60 |" in text
    assert sum(1 for line in lines if line.startswith("- rep ")) == 2


def test_the_machines_busy_time_includes_this_process() -> None:
    pid = os.getpid()
    machine, own = machine_busy_s(), process_cpu_s(pid)
    assert machine is not None and own is not None
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    machine_after, own_after = machine_busy_s(), process_cpu_s(pid)
    assert machine_after is not None and own_after is not None
    assert own_after - own >= 0.25
    # Both count in clock ticks; the machine's busy time holds this process's, whatever else ran.
    assert machine_after - machine >= own_after - own - 0.02
