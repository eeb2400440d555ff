"""The facilitator benchmark's verdicts: the node share, and the CPU halving judged against the code of an
earlier commit run in the same repetitions (`--baseline`)."""

from __future__ import annotations

from bench._report import render_report, targets_met
from bench._segments import BASELINE, NODE, OURS, REFERENCE, Segment


def _segment(
    server: str, mode: str, concurrency: int, *, rate: float, server_cpu_ms: float, failed: int = 0
) -> Segment:
    count = 500
    return Segment(
        server,
        mode,
        concurrency,
        count,
        elapsed_s=count / rate,
        ok=count - failed,
        server_cpu_ms=server_cpu_ms,
    )


def _run(
    *, ours_cpu: float, baseline_cpu: float | None, ours_rate: float = 800.0, baseline_failed: int = 0
) -> list[Segment]:
    run = [
        _segment(NODE, "raw", 1, rate=1000.0, server_cpu_ms=0.0),
        *(
            _segment(server, mode, concurrency, rate=rate, server_cpu_ms=cpu)
            for server, rate, cpu in ((OURS, 1000.0, 0.5), (REFERENCE, 100.0, 5.0))
            for mode, concurrency in (("verify", 1), ("verify", 50), ("settle", 1))
        ),
        _segment(OURS, "settle", 50, rate=ours_rate, server_cpu_ms=ours_cpu),
        _segment(REFERENCE, "settle", 50, rate=50.0, server_cpu_ms=7.0),
    ]
    if baseline_cpu is not None:
        run.append(
            _segment(BASELINE, "settle", 50, rate=300.0, server_cpu_ms=baseline_cpu, failed=baseline_failed)
        )
    return run


def test_the_cpu_target_is_met_at_half_the_baseline_codes_cpu_or_less() -> None:
    runs = [_run(ours_cpu=1.0, baseline_cpu=2.5), _run(ours_cpu=1.2, baseline_cpu=2.4)]
    assert targets_met(runs, 50)
    report = render_report(runs, concurrency=50, cores=2, header=[])
    assert "| the same, the baseline code's, in the same repetitions | 2.45 (2.40–2.50); 0 of 1000" in report
    assert "ours 0.45x of it | ours ≤ 0.5x the baseline's | yes |" in report


def test_the_cpu_target_is_missed_above_half_of_the_baseline_in_most_repetitions() -> None:
    runs = [
        _run(ours_cpu=1.0, baseline_cpu=2.5),
        _run(ours_cpu=1.3, baseline_cpu=2.4),
        _run(ours_cpu=1.4, baseline_cpu=2.6),
    ]
    assert not targets_met(runs, 50)
    assert "ours 0.54x of it | ours ≤ 0.5x the baseline's | **NO** |" in render_report(
        runs, concurrency=50, cores=2, header=[]
    )


def test_a_baseline_that_failed_settlements_is_no_yardstick_and_misses_the_target() -> None:
    runs = [_run(ours_cpu=1.0, baseline_cpu=2.5), _run(ours_cpu=1.0, baseline_cpu=9.0, baseline_failed=400)]
    assert not targets_met(runs, 50)
    report = render_report(runs, concurrency=50, cores=2, header=[])
    assert (
        "400 of 1000 failed, checks ok | – | ours 0.40x of it | ours ≤ 0.5x the baseline's | **NO** |"
        in report
    )


def test_without_a_baseline_the_cpu_target_is_shown_as_not_run_and_not_judged() -> None:
    runs = [_run(ours_cpu=9.0, baseline_cpu=None)]
    assert targets_met(runs, 50)
    report = render_report(runs, concurrency=50, cores=2, header=[])
    assert "| the same beside the baseline code's (`--baseline`) | not run |" in report


def test_the_node_share_is_judged_within_each_repetition() -> None:
    assert targets_met([_run(ours_cpu=1.0, baseline_cpu=2.5, ours_rate=760.0)], 50)
    assert not targets_met([_run(ours_cpu=1.0, baseline_cpu=2.5, ours_rate=740.0)], 50)
