"""`x402-merchant serve` with `X402_LOG_FORMAT=json` and `X402_ACCESS_LOG`: every line of its log is one JSON
object; the startup line says where it serves, its version, facilitator mode, network, tenants and cards;
a refused payment is a WARNING line with task, tenant, error code and reason, a settled one an INFO line
with task, tenant and outcome; requests are logged; the relayer key appears nowhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from a2a_x402.devchain import DevChain
from a2a_x402.observability import service_version
from a2a_x402.payer import sign_payment
from tests.faults.processes import merchant_processes
from tests.fixtures.merchant import MerchantWire, offered_terms, payment_message

from .payments.flows import offer


async def test_json_logs_of_a_serving_merchant(chain: DevChain, sqlite_url: str, tmp_path: Path) -> None:
    with merchant_processes(chain, sqlite_url, tmp_path) as processes:
        merchant = await processes.start(log_format="json", access_log="true")
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            [terms] = offered_terms(task).accepts
            refused = await wire.send(payment_message(task["id"], sign_payment(chain.new_payer(1), terms)))
            paid_task = await offer(wire)
            [paid_terms] = offered_terms(paid_task).accepts
            paid = await wire.send(
                payment_message(paid_task["id"], sign_payment(chain.new_payer(), paid_terms))
            )
            assert (await http.get("/readyz")).status_code == 200
        merchant.stop()
    text = merchant.log_path.read_text()

    lines: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines() if line.strip()]
    [startup] = [line for line in lines if line["message"].startswith("merchant ")]
    port = merchant.base_url.rsplit(":", 1)[1]
    assert {key: startup[key] for key in ("address", "version", "facilitator", "network", "tenants")} == {
        "address": f"127.0.0.1:{port}",
        "version": service_version(),
        "facilitator": "in-process",
        "network": chain.network,
        "tenants": 1,
    }
    assert startup["cards_signed"] is False and startup["level"] == "INFO"
    assert refused["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    [warning] = [line for line in lines if line["logger"] == "a2a_x402.merchant.payments"]
    assert warning["level"] == "WARNING"
    assert (warning["task_id"], warning["tenant"], warning["outcome"], warning["error_code"]) == (
        task["id"],
        "default",
        "refused",
        "INSUFFICIENT_FUNDS",
    )
    assert warning["reason"] == "invalid_exact_evm_insufficient_balance"
    assert paid["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    [settled] = [line for line in lines if line.get("outcome") == "settled"]
    assert (settled["task_id"], settled["tenant"], settled["level"]) == (paid_task["id"], "default", "INFO")
    access = [line for line in lines if line["logger"] == "x402.access"]
    assert {"method": "GET", "path": "/readyz", "status": 200} in [
        {k: line[k] for k in ("method", "path", "status")} for line in access
    ]
    key = chain.relayer_key.removeprefix("0x")
    assert all(key[i : i + 8] not in text for i in range(len(key) - 7))
