"""The reference merchant for operators: `/metrics` (promtool-clean, counting a real paid task and a refused
one) and `/readyz`, made to fail for real by each check: the node going away, a schema rolled back, an
unfunded relayer key made at run time, and a node of another chain behind a remote facilitator."""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from alembic.config import Config
from eth_account import Account
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402 import migrations
from a2a_x402.devchain import DevChain
from a2a_x402.facilitator._reverts import RevertedSettlement, RevertGuard
from a2a_x402.facilitator.wire import PaymentRequirements
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import Outbox, generate_secret
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine, normalize_url
from tests.faults.proxy import threaded_rpc_proxy
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    offered_terms,
    payment_message,
)
from tests.fixtures.metrics import promtool_check, sample
from tests.fixtures.servers import free_port

from .payments.flows import JSON, offer


def terms_of(task: JSON) -> PaymentRequirements:
    [requirements] = offered_terms(task).accepts
    return requirements


async def metrics_of(merchant: RunningMerchant) -> str:
    async with httpx.AsyncClient(base_url=merchant.base_url, timeout=HANG_S) as client:
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


async def readiness(merchant: RunningMerchant) -> tuple[int, list[str], dict[str, Any]]:
    async with httpx.AsyncClient(base_url=merchant.base_url, timeout=HANG_S) as client:
        response = await client.get("/readyz")
    body = response.json()
    return response.status_code, body["failing"], body["checks"]


def count(text: str, name: str, **labels: str) -> float:
    return sample(text, name, **labels) or 0.0


async def test_metrics_count_a_paid_task_and_a_refused_payment(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, caplog: pytest.LogCaptureFixture
) -> None:
    merchant = start_merchant(sqlite_url)
    before = await metrics_of(merchant)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire)
        paid = await wire.send(payment_message(task["id"], sign_payment(chain.new_payer(), terms_of(task))))
        refused_task = await offer(wire)
        with caplog.at_level(logging.WARNING, logger="a2a_x402.merchant.payments"):
            refused = await wire.send(
                payment_message(refused_task["id"], sign_payment(chain.new_payer(1), terms_of(refused_task)))
            )
    after = await metrics_of(merchant)

    assert paid["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert refused["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # fresh terms: underfunded
    promtool_check(before)
    promtool_check(after)
    payments = "x402_merchant_payments_total"
    assert (
        count(after, payments, tenant="default", outcome="settled")
        - count(before, payments, tenant="default", outcome="settled")
        == 1
    )
    assert (
        count(after, payments, tenant="default", outcome="refused")
        - count(before, payments, tenant="default", outcome="refused")
        == 1
    )
    assert (
        count(after, "x402_merchant_settle_seconds_count")
        - count(before, "x402_merchant_settle_seconds_count")
        == 1
    )
    assert (
        count(after, "x402_merchant_verify_seconds_count")
        - count(before, "x402_merchant_verify_seconds_count")
        == 2
    )
    assert sample(after, "x402_merchant_settlements_pending", state="settling") == 0
    assert sample(after, "x402_merchant_settlements_unfinalized") is not None
    engine = create_engine(sqlite_url)
    try:
        ledger = Ledger(engine, Outbox(engine))
        assert await ledger.unfinalized_count() == len(await ledger.unfinalized_settlements())
        assert [e.task_id for e in await ledger.unfinalized_settlements()] in ([], [task["id"]])
    finally:
        await engine.dispose()
    assert sample(after, "x402_merchant_webhook_deliveries_total", outcome="delivered") == 0
    relayer = merchant.settings.relayer_key
    assert relayer is not None
    nonces = [s for s in after.splitlines() if s.startswith("x402_relayer_next_nonce{")]
    assert len(nonces) == 1
    assert sample(after, "x402_chain_head_lag_seconds") is not None
    assert relayer.get_secret_value()[2:10] not in after

    [line] = [r for r in caplog.records if r.name == "a2a_x402.merchant.payments"]
    assert line.levelno == logging.WARNING
    fields = {k: getattr(line, k, None) for k in ("task_id", "tenant", "outcome", "error_code", "reason")}
    assert fields == {
        "task_id": refused_task["id"],
        "tenant": "default",
        "outcome": "refused",
        "error_code": "INSUFFICIENT_FUNDS",
        "reason": "invalid_exact_evm_insufficient_balance",
    }


async def test_webhook_deliveries_and_backlog_per_endpoint(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    asgi_server: Callable[..., str],
    tmp_path: Path,
) -> None:
    async def unavailable(_request: Request) -> Response:
        return Response(status_code=500)

    receiver = asgi_server(Starlette(routes=[Route("/hook", unavailable, methods=["POST"])]))
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f"""
[default]
pay_to = "{DEFAULT_PAY_TO}"
price = {DEFAULT_PRICE}

[tenants.acme]
pay_to = "{TWO_TENANTS["acme"][0]}"
price = {TWO_TENANTS["acme"][1]}
webhook_url = "{receiver}/hook"
webhook_secret = "{generate_secret()}"
"""
    )
    merchant = start_merchant(sqlite_url, tenants_file=tenants, webhooks_allow_private=True)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc", tenant="acme")
        task = await offer(wire)
        paid = await wire.send(payment_message(task["id"], sign_payment(chain.new_payer(), terms_of(task))))
    assert paid["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    async def retried() -> bool:
        return (
            count(await metrics_of(merchant), "x402_merchant_webhook_deliveries_total", outcome="retry") >= 1
        )

    await wait_until(retried, what="a webhook delivery attempt answered 500 and counted as a retry")
    text = await metrics_of(merchant)
    promtool_check(text)
    backlog = [line for line in text.splitlines() if line.startswith("x402_merchant_webhook_backlog{")]
    assert len(backlog) == 1 and float(backlog[0].rsplit(" ", 1)[1]) >= 1
    assert count(text, "x402_merchant_payments_total", tenant="acme", outcome="settled") == 1
    assert count(text, "x402_merchant_webhook_deliveries_total", outcome="delivered") == 0


async def test_ready_when_every_check_passes(merchant: RunningMerchant) -> None:
    status, failing, checks = await readiness(merchant)

    assert (status, failing) == (200, [])
    assert set(checks) == {"database", "chain", "relayer", "revert budget"}
    assert re.fullmatch(r"the database is at head \(m\w+, f\w+\)", checks["database"]["detail"])


async def test_a_relayer_past_its_revert_budget_is_not_ready(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The in-process facilitator's own check: its key spent the hour's budget on reverted settlements.
    relayer = Account.from_key(chain.relayer_key).address
    engine = create_engine(sqlite_url)
    try:
        guard = RevertGuard(engine, chain_id=chain.chain_id, cooloff_s=3600, code_payers=3, budget_wei=None)
        await guard.record(RevertedSettlement("0x" + "ab" * 32, relayer, DEFAULT_PAY_TO, None, 2 * 10**15))
    finally:
        await engine.dispose()
    monkeypatch.setenv("X402_RELAYER_REVERT_BUDGET_WEI", str(10**15))
    merchant = start_merchant(sqlite_url)

    status, failing, checks = await readiness(merchant)

    assert (status, failing) == (503, ["revert budget"])
    assert checks["revert budget"]["detail"].startswith(
        f"{relayer} spent 0.002 ETH on reverted settlements in the last hour, its budget of 0.001 ETH"
    )


async def test_the_node_going_away_is_not_ready_until_it_is_back(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain
) -> None:
    with threaded_rpc_proxy(chain.rpc_url) as proxy:
        merchant = start_merchant(sqlite_url, rpc_url=proxy.url)
        assert (await readiness(merchant))[0] == 200
        proxy.offline = True
        down = await readiness(merchant)
        metrics = await metrics_of(merchant)
        proxy.offline = False
        back = await readiness(merchant)

    status, failing, checks = down
    assert (status, failing) == (503, ["chain", "relayer"])
    assert checks["database"]["ok"] is True
    promtool_check(metrics)
    assert sample(metrics, "x402_scrape_reading_ok", reading="chain") == 0
    assert back[:2] == (200, [])


@pytest.mark.error_logs("why: the schema is rolled back under the running merchant, whose passes then fail")
async def test_a_schema_rolled_back_is_not_ready(start_merchant: MerchantStarter, sqlite_url: str) -> None:
    merchant = start_merchant(sqlite_url)
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("sqlalchemy.url", normalize_url(sqlite_url))

    await asyncio.to_thread(command.downgrade, config, "m0004")
    status, failing, checks = await readiness(merchant)

    assert (status, failing) == (503, ["database"])
    assert "the database is not migrated (merchant at m0004, head m" in checks["database"]["detail"]


async def test_an_unfunded_relayer_is_not_ready(start_merchant: MerchantStarter, sqlite_url: str) -> None:
    key = "0x" + secrets.token_hex(32)  # made now, never funded
    merchant = start_merchant(sqlite_url, relayer_key=key)

    status, failing, checks = await readiness(merchant)

    assert (status, failing) == (503, ["relayer"])
    assert "below the floor of 0.001 ETH (X402_RELAYER_MIN_BALANCE_WEI)" in checks["relayer"]["detail"]
    assert key[2:10] not in str(checks)


async def test_a_node_of_another_chain_and_a_dead_remote_facilitator_are_not_ready(
    start_merchant: MerchantStarter, sqlite_url: str
) -> None:
    merchant = start_merchant(
        sqlite_url, network="eip155:8453", facilitator_url=f"http://127.0.0.1:{free_port()}"
    )

    status, failing, checks = await readiness(merchant)
    metrics = await metrics_of(merchant)

    assert (status, failing) == (503, ["chain", "facilitator"])
    assert "X402_NETWORK is eip155:8453" in checks["chain"]["detail"]
    assert re.fullmatch(r"the database is at head \(m\w+\)", checks["database"]["detail"])
    promtool_check(metrics)
    assert "x402_relayer_balance_wei{" not in metrics  # no relayer of its own with a remote facilitator
