"""No ERROR line under normal traffic: a merchant and its facilitator, as real processes, serve paid,
refused (insufficient funds, a bad signature), repeated (a payment presented again to its finished task)
and canceled payments over JSON-RPC and HTTP+JSON (a merchant settling in process too, and a whole run of
the conformance kit, gRPC included); their whole logs hold no ERROR line and no traceback.

Refusals are WARNING lines (the client did something the protocol refuses, the operator may want to know);
an ERROR line is for the operator to act on, and nothing here needs acting on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.conformance import KitSettings, render_console, run_conformance
from a2a_x402.devchain import DevChain
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import tampered
from tests.faults.processes import merchant_processes
from tests.fixtures.a2a_errors import A2ACallError
from tests.fixtures.facilitator_processes import facilitator_processes
from tests.fixtures.merchant import MerchantWire, offered_terms, payment_message, rejection_message
from tests.fixtures.servers import free_port

from .payments.flows import offer

JSON = dict[str, Any]
BINDINGS = ("jsonrpc", "rest")


def _state(answer: JSON) -> str:
    return str(answer["task"]["status"]["state"])


async def _normal_traffic(wire: MerchantWire, chain: DevChain) -> list[str]:
    """Every kind of payment a day brings, on `wire`; the final state of each, in order."""
    states: list[str] = []

    paid_task = await offer(wire)
    [terms] = offered_terms(paid_task).accepts
    payment = sign_payment(chain.new_payer(), terms)
    states.append(_state(await wire.send(payment_message(paid_task["id"], payment))))
    # The same payment presented again to the task it finished: refused, the task unchanged.
    with pytest.raises(A2ACallError) as repeated:
        await wire.send(payment_message(paid_task["id"], payment))
    states.append(repeated.value.reason)

    poor_task = await offer(wire)
    [terms] = offered_terms(poor_task).accepts
    states.append(
        _state(await wire.send(payment_message(poor_task["id"], sign_payment(chain.new_payer(1), terms))))
    )

    forged_task = await offer(wire)
    [terms] = offered_terms(forged_task).accepts
    stranger = sign_payment(Account.create().key.hex(), terms)
    forged = tampered(sign_payment(chain.new_payer(), terms), signature=stranger.payload.signature)
    states.append(_state(await wire.send(payment_message(forged_task["id"], forged))))

    canceled_task = await offer(wire)
    states.append(str((await wire.cancel(canceled_task["id"]))["status"]["state"]))

    rejected_task = await offer(wire)
    states.append(_state(await wire.send(rejection_message(rejected_task["id"]))))
    return states


def _bad_lines(text: str) -> list[str]:
    """The lines of a JSON log at ERROR or above, or carrying a traceback."""
    bad = []
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record["level"] in ("ERROR", "CRITICAL") or "exc_info" in record or "Traceback" in line:
            bad.append(line)
    return bad


async def test_normal_traffic_logs_no_error_and_no_traceback(
    chain: DevChain, sqlite_url: str, postgres_url: str, tmp_path: Path
) -> None:
    async with facilitator_processes(chain, tmp_path) as facilitators:
        facilitator = await facilitators.serve(postgres_url, X402_LOG_FORMAT="json", X402_ACCESS_LOG="false")
        with merchant_processes(chain, sqlite_url, tmp_path) as processes:
            merchant = await processes.start(facilitator_url=facilitator.url, log_format="json")
            async with merchant.http() as http:
                states = {
                    binding: await _normal_traffic(MerchantWire(http, binding), chain) for binding in BINDINGS
                }
            merchant.stop()
    facilitator_log = facilitator.log()

    expected = [
        "TASK_STATE_COMPLETED",
        "UNSUPPORTED_OPERATION",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_CANCELED",
    ]
    assert states == {binding: expected for binding in BINDINGS}
    merchant_log = merchant.log_path.read_text()
    assert _bad_lines(merchant_log) == []
    assert _bad_lines(facilitator_log) == []
    # The logs hold the traffic: the refusals as WARNING lines, the settlements, both services' stops.
    merchant_lines = [json.loads(line) for line in merchant_log.splitlines() if line.strip()]
    warned = {line.get("error_code") for line in merchant_lines if line["level"] == "WARNING"}
    assert warned >= {"INSUFFICIENT_FUNDS", "INVALID_SIGNATURE"}
    assert [line.get("outcome") for line in merchant_lines].count("settled") == len(BINDINGS)
    facilitator_lines = [json.loads(line) for line in facilitator_log.splitlines() if line.strip()]
    for lines, name in ((merchant_lines, "x402-merchant"), (facilitator_lines, "x402-facilitator")):
        assert lines[-1]["message"] == f"{name} stopped by SIGTERM: requests in flight were finished"


async def test_a_merchant_settling_in_process_logs_no_error_under_normal_traffic(
    chain: DevChain, postgres_url: str, tmp_path: Path
) -> None:
    with merchant_processes(chain, postgres_url, tmp_path) as processes:
        merchant = await processes.start(log_format="json")
        async with merchant.http() as http:
            states = {
                binding: await _normal_traffic(MerchantWire(http, binding), chain) for binding in BINDINGS
            }
        merchant.stop()

    assert all(found[0] == "TASK_STATE_COMPLETED" for found in states.values()), states
    merchant_log = merchant.log_path.read_text()
    assert _bad_lines(merchant_log) == []
    merchant_lines = [json.loads(line) for line in merchant_log.splitlines() if line.strip()]
    assert [line.get("outcome") for line in merchant_lines].count("settled") == len(BINDINGS)
    assert merchant_lines[-1]["message"].endswith("stopped by SIGTERM: requests in flight were finished")


async def test_a_whole_conformance_run_logs_no_error(
    chain: DevChain, postgres_url: str, tmp_path: Path
) -> None:
    """The kit's run, every binding (gRPC too) and both A2A versions, refusals and repeats by the dozen: the
    run issue 28 counted 12 ERROR tracebacks in."""
    with merchant_processes(chain, postgres_url, tmp_path) as processes:
        merchant = await processes.start(log_format="json", grpc_port=free_port())
        settings = KitSettings(merchant.base_url, chain.rpc_url, chain.new_payer(), concurrency=4)
        report = await run_conformance(settings)
        merchant.stop()

    assert report.ok, render_console(report)
    assert {result.target.split()[0] for result in report.results} >= {"JSONRPC", "HTTP+JSON", "GRPC"}
    assert _bad_lines(merchant.log_path.read_text()) == []
