"""The facilitator benchmark's Permit2 kinds (issue 29) in small quick form: for `exact` by Permit2 and for
`upto`, ours and the x402 SDK's facilitator settle sequentially and at concurrency 50, the node's ceiling
runs before ours at 50, and every settlement lands on chain for exactly what the kind charges; a settlement
of another amount breaks the segment's check; the summary's table per kind."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from eth_utils.crypto import keccak

from bench._chain import BenchChain, ChainState, start_bench_chain
from bench._gas_payments import Kind
from bench._kinds import PERMIT2_KINDS
from bench._kinds_report import render_kinds
from bench._payloads import EIP3009_KIND
from bench._report import targets_met
from bench._segments import NODE, OURS, REFERENCE, Segment, measure_raw
from bench.facilitator_bench import QUICK, Runner

# Quick's shape at a tenth of its size: concurrency 50 and the full warm-up path, a few seconds a segment.
_PLAN = dataclasses.replace(
    QUICK, kind_sequential_count=8, kind_concurrent_count=60, warmup_count=3, payers=4
)
_TRANSFER = "0x" + keccak(text="Transfer(address,address,uint256)").hex()


@pytest.fixture(scope="module")
def bench_chain() -> Iterator[BenchChain]:
    """An anvil of the benchmark's own: its segments revert the chain to their snapshot."""
    with start_bench_chain(_PLAN.payers) as chain:
        yield chain


@pytest.fixture(scope="module")
def runner(bench_chain: BenchChain, tmp_path_factory: pytest.TempPathFactory) -> Runner:
    kinds = [kind.label for kind in PERMIT2_KINDS]
    return Runner(bench_chain, _PLAN, tmp_path_factory.mktemp("kinds"), kinds=kinds)


def _transfers_to_payee(chain: BenchChain, asset: str, first: int, last: int) -> list[tuple[str, int]]:
    """(transaction, amount) of each Transfer of `asset` to the payee mined in blocks first..last (an
    eth_getLogs query of its own, apart from the segments' balance checks)."""
    logs = chain.chain.rpc.call(
        "eth_getLogs",
        [
            {
                "address": asset,
                "fromBlock": hex(first),
                "toBlock": hex(last),
                "topics": [_TRANSFER, None, "0x" + "00" * 12 + chain.pay_to[2:].lower()],
            }
        ],
    )
    return [(log["transactionHash"], int(log["data"], 16)) for log in logs]


@pytest.mark.parametrize("kind", PERMIT2_KINDS, ids=[kind.scheme for kind in PERMIT2_KINDS])
def test_every_settlement_of_each_segment_lands_for_what_the_kind_charges(
    kind: Kind, runner: Runner, bench_chain: BenchChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    [batches] = [b for b in runner.permit2 if b.kind == kind]
    order = [(OURS, runner.start_ours), (REFERENCE, runner.start_reference)]
    asset = bench_chain.chain.plain_asset
    # Every segment starts by reverting the chain: each one's transfers are read just before that, the
    # last one's at the end. The snapshot sits one block below each segment's first.
    landed: list[list[tuple[str, int]]] = []
    reset = bench_chain.reset

    def read_then_reset() -> ChainState:
        state = bench_chain.state()
        if state.height > snapshot:
            landed.append(_transfers_to_payee(bench_chain, asset, snapshot + 1, state.height))
        return reset()

    snapshot = reset().height - 1
    monkeypatch.setattr(bench_chain, "reset", read_then_reset)

    segments = runner.kind_segments(0, order, batches)
    landed.append(_transfers_to_payee(bench_chain, asset, snapshot + 1, bench_chain.state().height))

    assert [(s.server, s.concurrency) for s in segments] == [
        (OURS, 1),
        (REFERENCE, 1),
        (NODE, 1),
        (OURS, 50),
        (REFERENCE, 50),
    ]
    for segment in segments:
        assert segment.kind == batches.kind.label
        assert segment.failed == 0, (segment.server, segment.failures, segment.failure_samples)
        assert not segment.problems, (segment.server, segment.problems)
    # Counted on chain: one transfer of the kind's charge per settlement, each in a transaction of its own.
    assert [len(transfers) for transfers in landed[-len(segments) :]] == [s.count for s in segments]
    for transfers in landed[-len(segments) :]:
        assert len({tx for tx, _ in transfers}) == len(transfers)
        assert {amount for _, amount in transfers} == {batches.kind.charged}


def test_a_ceiling_that_moves_another_amount_than_the_kind_charges_breaks_its_check(
    runner: Runner, bench_chain: BenchChain
) -> None:
    upto = next(b for b in runner.permit2 if b.kind.scheme == "upto")
    bench_chain.reset()
    # The proxy calls settle 60 % of each maximum; the batch claims the whole maximum.
    batch = dataclasses.replace(upto.sign(4), charged=int(upto.requirements["amount"]))

    segment = measure_raw(bench_chain, batch)

    assert segment.ok == 4
    assert segment.problems == (
        f"payee balance grew by {4 * upto.kind.charged}, expected {4 * batch.charged}",
    )


def _segment(kind: str, server: str, mode: str, concurrency: int, rate: float, failed: int = 0) -> Segment:
    return Segment(
        server, mode, concurrency, 100, elapsed_s=(100 - failed) / rate, ok=100 - failed, kind=kind
    )


def test_the_table_sets_each_kind_beside_the_reference_and_its_own_ceiling() -> None:
    upto = PERMIT2_KINDS[1].label
    run = [
        _segment(EIP3009_KIND, NODE, "raw", 1, 1000.0),
        _segment(EIP3009_KIND, OURS, "settle", 50, 500.0),
        _segment(EIP3009_KIND, REFERENCE, "settle", 50, 50.0),
        _segment(upto, OURS, "settle", 1, 40.0),
        _segment(upto, REFERENCE, "settle", 1, 20.0),
        _segment(upto, NODE, "raw", 1, 800.0),
        _segment(upto, OURS, "settle", 50, 200.0, failed=2),
        _segment(upto, REFERENCE, "settle", 50, 25.0),
    ]

    lines = render_kinds([run], concurrency=50)

    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| kind")]
    assert rows == [
        f"| {EIP3009_KIND} | 1 | – | – | – | – | – | – | – |",
        f"| {EIP3009_KIND} | 50 | 500.0 | 50.0 | 10.00x | 1,000.0 | 50% | 0 of 100 failed, checks ok "
        "| 0 of 100 failed, checks ok |",
        f"| {upto} | 1 | 40.0 | 20.0 | 2.00x | – | – | 0 of 100 failed, checks ok "
        "| 0 of 100 failed, checks ok |",
        f"| {upto} | 50 | 200.0 | 25.0 | 8.00x | 800.0 | 25% | 2 of 100 failed, checks ok "
        "| 0 of 100 failed, checks ok |",
    ]


def test_the_run_fails_when_ours_failed_a_settlement_of_any_kind() -> None:
    upto = PERMIT2_KINDS[1].label
    clean = [_segment(upto, OURS, "settle", 50, 200.0), _segment(upto, REFERENCE, "settle", 50, 25.0)]
    assert targets_met([clean], 50)
    assert not targets_met([[*clean, _segment(upto, OURS, "settle", 1, 40.0, failed=1)]], 50)
