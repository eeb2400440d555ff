"""Load: two merchant replicas on one PostgreSQL database, many payers paying at once.

Each replica is its own `x402-merchant serve` process with its own relayer key (anvil dev accounts 2 and
3: one key shared by two processes would race for nonces). Every payer asks its home replica for terms,
signs, and pays; every fifth payer submits the same payment several times, to both replicas at once. The
invariants must hold, each payer must get a definite answer (directly or by polling its task), and each paid
task must be one transfer and one booking. The run reports paid tasks per second and the latency
percentiles from payment submission to the definite answer (in the "load figures" section of the
terminal summary).

The 40-payer run is always on; the 200-payer run is a soak run (`pytest --soak`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from devchain import ANVIL_DEV_KEYS, DevChain
from payer import sign_payment
from tests.fixtures.invariants import assert_invariants
from tests.fixtures.merchant import A2ACallError, MerchantWire, payment_message

from .clients import DEFINITE_STATES, JSON, open_task, poll_until_definite
from .conftest import LOAD_FIGURES, PAY_TOS
from .processes import MerchantProcess, MerchantProcesses

_DUPLICATE_EVERY = 5  # a fifth of the payers re-submit
_COPIES_PER_REPLICA = 2  # ... the same payment twice to each replica
_CLIENT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class _ClientRun:
    """One payer's run: its task, what each submission answered, its final state and latency."""

    task_id: str
    answers: tuple[str, ...]
    final_state: str
    latency_s: float


def _answer(outcome: JSON | BaseException) -> str:
    if isinstance(outcome, A2ACallError):
        return f"error {outcome.reason or outcome.rpc_code}"
    if isinstance(outcome, BaseException):
        raise outcome
    return str(outcome["task"]["status"]["state"])


async def _pay_once(
    key: str, home: MerchantWire, replicas: Sequence[MerchantWire], duplicate: bool
) -> _ClientRun:
    task_id, terms = await open_task(home)
    payload = sign_payment(key, terms)
    targets = [r for r in replicas for _ in range(_COPIES_PER_REPLICA)] if duplicate else [home]
    started = time.monotonic()
    outcomes = await asyncio.gather(
        *(target.send(payment_message(task_id, payload)) for target in targets), return_exceptions=True
    )
    answers = tuple(_answer(outcome) for outcome in outcomes)
    final = next((answer for answer in answers if answer == "TASK_STATE_COMPLETED"), None)
    if final is None:
        final = (await poll_until_definite(home, task_id, timeout_s=_CLIENT_TIMEOUT_S))["status"]["state"]
    return _ClientRun(task_id, answers, str(final), time.monotonic() - started)


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


async def _pay_all(
    replicas: Sequence[MerchantProcess], keys: Sequence[str]
) -> tuple[list[_ClientRun], float]:
    """Every payer pays at once; their runs and the wall time until the last one had its answer."""
    clients = [replica.http(connections=len(keys) * 2, timeout_s=_CLIENT_TIMEOUT_S) for replica in replicas]
    try:
        wires = [MerchantWire(client, "jsonrpc") for client in clients]
        started = time.monotonic()
        runs = await asyncio.gather(
            *(
                _pay_once(key, wires[i % 2], wires, duplicate=i % _DUPLICATE_EVERY == 0)
                for i, key in enumerate(keys)
            )
        )
        return list(runs), time.monotonic() - started
    finally:
        for client in clients:
            await client.aclose()


async def _run_load(
    chain: DevChain,
    merchants: MerchantProcesses,
    new_payer: Callable[..., str],
    postgres_url: str,
    first_block: int,
    payers: int,
) -> str:
    """Run the load; check the answers and the invariants; return the figures as one line."""
    replicas = await asyncio.gather(
        merchants.start(relayer_key=ANVIL_DEV_KEYS[2]), merchants.start(relayer_key=ANVIL_DEV_KEYS[3])
    )
    runs, elapsed_s = await _pay_all(replicas, [new_payer() for _ in range(payers)])

    assert all(run.final_state in DEFINITE_STATES for run in runs)
    assert Counter(run.final_state for run in runs) == {"TASK_STATE_COMPLETED": payers}
    report = await assert_invariants(
        chain,
        postgres_url,
        PAY_TOS,
        from_block=first_block,
        client_views={run.task_id: run.final_state for run in runs},
    )
    assert len(report.transfers) == payers  # exactly one transfer per paid task
    assert sorted(report.booked_tasks) == sorted(run.task_id for run in runs)
    resubmitted = Counter(a for i, run in enumerate(runs) if i % _DUPLICATE_EVERY == 0 for a in run.answers)
    # A payment being taken is never answered with the request to pay: a client would take it as one.
    assert "TASK_STATE_INPUT_REQUIRED" not in resubmitted, resubmitted
    latencies = [run.latency_s for run in runs]
    return (
        f"{payers} payers on 2 replicas ({payers // _DUPLICATE_EVERY} submitting "
        f"{2 * _COPIES_PER_REPLICA} times): {payers / elapsed_s:.1f} paid tasks/s ({elapsed_s:.1f} s), "
        f"latency p50 {_percentile(latencies, 0.5):.2f} s, p99 {_percentile(latencies, 0.99):.2f} s; "
        f"answers to the repeated submissions: {dict(resubmitted)}"
    )


async def test_two_replicas_with_concurrent_and_repeated_payments_keep_the_invariants(
    chain: DevChain,
    merchants: MerchantProcesses,
    new_payer: Callable[..., str],
    postgres_url: str,
    first_block: int,
    record_property: Callable[[str, object], None],
) -> None:
    figures = await _run_load(chain, merchants, new_payer, postgres_url, first_block, payers=40)
    record_property(LOAD_FIGURES, figures)


@pytest.mark.soak
async def test_two_hundred_payers_on_two_replicas_keep_the_invariants(
    chain: DevChain,
    merchants: MerchantProcesses,
    new_payer: Callable[..., str],
    postgres_url: str,
    first_block: int,
    record_property: Callable[[str, object], None],
) -> None:
    figures = await _run_load(chain, merchants, new_payer, postgres_url, first_block, payers=200)
    record_property(LOAD_FIGURES, figures)
