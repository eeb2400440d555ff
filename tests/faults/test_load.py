"""Load: two merchant replicas on one PostgreSQL database, many payers paying at once, to two tenants.

Each replica is its own `x402-merchant serve` process with its own relayer key (anvil dev accounts 2 and
3: one key shared by two processes would race for nonces), serving two tenants with different payTo
addresses (the default tenant and `acme`). Every payer asks its home replica for terms, signs, and pays;
every fifth payer submits the same payment several times, to both replicas at once. The invariants must
hold, each payer must get a definite answer (directly or by polling its task), each paid task must be one
transfer and one booking, and each tenant's payee must be credited with its own payers' payments only. The
run reports paid tasks per second and the latency percentiles from payment submission to the definite
answer (in the "load figures" section of the terminal summary).

The 200-payer run is always on (about 30 s on a quiet machine); `./scripts/test` runs these tests (marked
`alone`) by themselves after the parallel run, so that their figures measure the code and not the other
tests sharing the machine. The soak run (`pytest --soak`) repeats it for five rounds
on the same replicas (1,000 payers), checking the invariants after every round.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from a2a_x402.devchain import ANVIL_DEV_KEYS, DevChain
from a2a_x402.payer import sign_payment
from tests.conftest import LOAD_FIGURES
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    A2ACallError,
    MerchantWire,
    payment_message,
    write_tenants_file,
)
from tests.fixtures.servers import idle_connection_answers

from .clients import DEFINITE_STATES, JSON, open_task, poll_until_definite
from .conftest import Scenario
from .processes import MerchantProcess

_DUPLICATE_EVERY = 5  # a fifth of the payers re-submit
_COPIES_PER_REPLICA = 2  # ... the same payment twice to each replica
_CLIENT_TIMEOUT_S = 120.0
_PAYERS = 200
_SOAK_ROUNDS = 5
_ACME_EVERY = 3  # a third of the payers pay the tenant `acme`, the others the default tenant
_TENANTS = {"": (DEFAULT_PAY_TO, DEFAULT_PRICE), "acme": TWO_TENANTS["acme"]}
_PAY_TOS = tuple(pay_to for pay_to, _ in _TENANTS.values())


@dataclass(frozen=True)
class _ClientRun:
    """One payer's run: its task, what each submission answered, its final state and latency."""

    task_id: str
    tenant: str
    pay_to: str
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
    key: str, home: MerchantWire, replicas: Sequence[MerchantWire], duplicate: bool, tenant: str
) -> _ClientRun:
    task_id, terms = await open_task(home)
    assert terms.pay_to == _TENANTS[tenant][0]
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
    return _ClientRun(task_id, tenant, terms.pay_to, answers, str(final), time.monotonic() - started)


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


async def _pay_all(
    replicas: Sequence[MerchantProcess], keys: Sequence[str]
) -> tuple[list[_ClientRun], float]:
    """Every payer pays at once; their runs and the wall time until the last one had its answer."""
    clients = [replica.http(connections=len(keys) * 2, timeout_s=_CLIENT_TIMEOUT_S) for replica in replicas]
    try:
        wires = {t: [MerchantWire(client, "jsonrpc", t) for client in clients] for t in _TENANTS}
        tenants = ["acme" if i % _ACME_EVERY == 1 else "" for i in range(len(keys))]
        started = time.monotonic()
        runs = await asyncio.gather(
            *(
                _pay_once(
                    key,
                    wires[tenant][i % 2],
                    wires[tenant],
                    duplicate=i % _DUPLICATE_EVERY == 0,
                    tenant=tenant,
                )
                for i, (key, tenant) in enumerate(zip(keys, tenants, strict=True))
            )
        )
        return list(runs), time.monotonic() - started
    finally:
        for client in clients:
            await client.aclose()


async def _run_load(scenario: Scenario, tenants_file: Path, rounds: int = 1) -> str:
    """Run `rounds` of the load on the same replicas, checking the answers and the invariants after each;
    return the figures of all rounds as one line."""
    # The 200 payers all call from 127.0.0.1, which the bounds on unpaid work count as one caller: here
    # they stand for 200 callers, so those bounds (tested in tests/merchant/payments/test_unpaid.py) are
    # set beyond what the load can reach.
    many = 100_000
    replicas = await asyncio.gather(
        *(
            scenario.merchants.start(
                relayer_key=key, tenants_file=tenants_file, max_unpaid_tasks=many, max_unpaid_per_minute=many
            )
            for key in (ANVIL_DEV_KEYS[2], ANVIL_DEV_KEYS[3])
        )
    )
    runs: list[_ClientRun] = []
    elapsed_s = 0.0
    for _ in range(rounds):
        balances = {pay_to: scenario.chain.balance_of(pay_to) for pay_to in _PAY_TOS}
        round_runs, round_s = await _pay_all(replicas, [scenario.new_payer() for _ in range(_PAYERS)])
        _check_round(scenario.chain, round_runs, balances)
        runs += round_runs
        elapsed_s += round_s
        report = await scenario.invariants(
            pay_tos=_PAY_TOS, client_views={run.task_id: run.final_state for run in runs}
        )
        assert len(report.transfers) == len(runs)  # exactly one transfer per paid task
        assert sorted(report.booked_tasks) == sorted(run.task_id for run in runs)
    resubmitted = Counter(a for i, run in enumerate(runs) if i % _DUPLICATE_EVERY == 0 for a in run.answers)
    # A payment being taken is never answered with the request to pay: a client would take it as one.
    assert "TASK_STATE_INPUT_REQUIRED" not in resubmitted, resubmitted
    latencies = [run.latency_s for run in runs]
    payers = len(runs)
    tenants = Counter("acme" if run.tenant else "default" for run in runs)
    return (
        f"{payers} payers ({rounds} round{'s' if rounds > 1 else ''} of {_PAYERS}) on 2 replicas, "
        f"tenants {dict(tenants)} ({payers // _DUPLICATE_EVERY} submitting {2 * _COPIES_PER_REPLICA} times): "
        f"{payers / elapsed_s:.1f} paid tasks/s ({elapsed_s:.1f} s), "
        f"latency p50 {_percentile(latencies, 0.5):.2f} s, p99 {_percentile(latencies, 0.99):.2f} s; "
        f"answers to the repeated submissions: {dict(resubmitted)}"
    )


def _check_round(chain: DevChain, runs: Sequence[_ClientRun], balances_before: dict[str, int]) -> None:
    """Every payer of the round had its task completed, and each tenant's payee got its own payers' money."""
    assert all(run.final_state in DEFINITE_STATES for run in runs)
    assert Counter(run.final_state for run in runs) == {"TASK_STATE_COMPLETED": len(runs)}
    for tenant, (pay_to, price) in _TENANTS.items():
        paid = sum(1 for run in runs if run.tenant == tenant)
        assert all(run.pay_to == pay_to for run in runs if run.tenant == tenant)
        assert chain.balance_of(pay_to) - balances_before[pay_to] == paid * price, tenant


@pytest.fixture
def tenants_file(tmp_path: Path) -> Path:
    """The replicas' tenants: the default tenant and `acme`, with different payTo addresses and prices."""
    return write_tenants_file(tmp_path / "tenants.toml", _TENANTS)


@pytest.mark.alone
async def test_two_hundred_payers_on_two_replicas_and_two_tenants_keep_the_invariants(
    scenario: Scenario, tenants_file: Path, record_property: Callable[[str, object], None]
) -> None:
    figures = await _run_load(scenario, tenants_file)
    record_property(LOAD_FIGURES, figures)


async def test_a_merchant_keeps_an_idle_connection_open_longer_than_clients_reuse_it(
    scenario: Scenario,
) -> None:
    # Else, under load, a payment sent on a pooled connection the merchant is closing gets no answer.
    merchant = await scenario.merchants.start()
    assert await idle_connection_answers(merchant.base_url)


@pytest.mark.alone
@pytest.mark.soak
async def test_five_rounds_of_two_hundred_payers_keep_the_invariants(
    scenario: Scenario, tenants_file: Path, record_property: Callable[[str, object], None]
) -> None:
    figures = await _run_load(scenario, tenants_file, rounds=_SOAK_ROUNDS)
    record_property(LOAD_FIGURES, figures)
