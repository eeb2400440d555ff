"""The facilitator service for operators: `/metrics` (promtool-clean, counting a real settlement) and
`/readyz`, made to fail for real by each of its checks: a dead RPC port, a wrong chain id, a never-migrated
claim store and a relayer key with no funds."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator, FacilitatorSettings, create_app
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.metrics import promtool_check, sample
from tests.fixtures.servers import free_port

from .conftest import StartService
from .payments import relayer_address, tx_count


@asynccontextmanager
async def served(settings: FacilitatorSettings) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP app around a facilitator built from `settings` *without* its startup checks (the state a
    running service is in when its node, database or relayer goes bad), in this event loop."""
    service = Facilitator.from_settings(settings)
    app = create_app(service, settings=settings)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                timeout=HANG_S, transport=transport, base_url="http://facilitator"
            ) as client:
                yield client
    finally:
        await service.aclose()


async def readiness(client: httpx.AsyncClient) -> tuple[int, list[str], dict[str, Any]]:
    response = await client.get("/readyz")
    body = response.json()
    return response.status_code, body["failing"], body["checks"]


async def test_metrics_pass_promtool_and_count_a_settlement(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    body = {
        "x402Version": 2,
        "paymentPayload": payload.to_json_dict(),
        "paymentRequirements": requirements.to_json_dict(),
    }

    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
        before = (await client.get("/metrics")).text
        assert (await client.post("/verify", json=body)).json()["isValid"] is True
        assert (await client.post("/settle", json=body)).json()["success"] is True
        response = await client.get("/metrics")

    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    promtool_check(before)
    promtool_check(text)
    assert sample(before, "x402_facilitator_settle_seconds_count") == 0
    assert sample(text, "x402_facilitator_settle_seconds_count") == 1
    assert sample(text, "x402_facilitator_verify_seconds_count") == 1
    assert sample(text, "x402_facilitator_settlements_total", result="success") == 1
    assert sample(text, "x402_facilitator_verifications_total", result="valid") == 1
    relayer = relayer_address(chain)
    assert sample(text, "x402_relayer_next_nonce", relayer=relayer) == tx_count(chain, relayer, "pending")
    assert (sample(text, "x402_relayer_balance_wei", relayer=relayer) or 0) > 0
    assert sample(text, "x402_facilitator_settlements_pending", state="broadcast") == 0
    assert sample(text, "x402_chain_head_lag_seconds") is not None
    assert sample(text, "x402_scrape_reading_ok", reading="chain") == 1
    # The pool's view of its one key: leased here, taking work, and the gauge of fee replacements.
    assert sample(text, "x402_relayer_held", relayer=relayer) == 1
    assert sample(text, "x402_relayer_usable", relayer=relayer) == 1
    assert sample(text, "x402_relayer_in_flight", relayer=relayer) is not None
    assert sample(text, "x402_facilitator_fee_replacements") == 0


async def test_ready_when_every_check_passes(chain: DevChain, sqlite_url: str, settings_for: Any) -> None:
    async with served(settings_for(sqlite_url)) as client:
        status, failing, checks = await readiness(client)
        live = await client.get("/healthz")

    assert (status, failing) == (200, [])
    assert set(checks) == {"database", "chain", "relayer", "revert budget"}
    assert all(check["ok"] for check in checks.values())
    assert live.json()["status"] == "ok"


async def test_a_dead_rpc_port_is_not_ready_and_metrics_leave_its_gauges_out(
    sqlite_url: str, settings_for: Any
) -> None:
    settings = settings_for(sqlite_url, rpc_url=f"http://127.0.0.1:{free_port()}", rpc_timeout_s=2.0)
    async with served(settings) as client:
        status, failing, checks = await readiness(client)
        live = await client.get("/healthz")
        metrics = (await client.get("/metrics")).text

    assert (status, failing) == (503, ["chain", "relayer"])
    assert checks["database"]["ok"] is True
    assert "unreachable" in checks["chain"]["detail"]
    assert live.status_code == 200  # liveness does not depend on the node
    promtool_check(metrics)
    assert sample(metrics, "x402_scrape_reading_ok", reading="chain") == 0
    assert sample(metrics, "x402_chain_head_block") is None


async def test_a_wrong_chain_id_is_not_ready(sqlite_url: str, settings_for: Any) -> None:
    async with served(settings_for(sqlite_url, network="eip155:8453")) as client:
        status, failing, checks = await readiness(client)

    assert (status, failing) == (503, ["chain"])
    assert "X402_NETWORK is eip155:8453" in checks["chain"]["detail"]


async def test_a_never_migrated_claim_store_is_not_ready(tmp_path: Path, settings_for: Any) -> None:
    async with served(settings_for(f"sqlite+aiosqlite:///{tmp_path / 'never-migrated.db'}")) as client:
        status, failing, checks = await readiness(client)

    assert (status, failing) == (503, ["database"])
    assert checks["database"]["detail"].startswith(
        "the database is not migrated (facilitator at no revision, head"
    )
    assert checks["database"]["detail"].endswith("run `x402-facilitator db upgrade`")


async def test_an_unfunded_relayer_is_not_ready(start_service: StartService, sqlite_url: str) -> None:
    key = "0x" + secrets.token_hex(32)  # made now, never funded
    base_url = start_service(sqlite_url, relayer_key=key, relayer_min_balance_wei=1)

    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as client:
        response = await client.get("/readyz")

    body = response.json()
    assert (response.status_code, body["failing"]) == (503, ["relayer"])
    assert "holds 0 ETH, below the floor of 0.000000000000000001 ETH" in body["checks"]["relayer"]["detail"]
    assert key[2:10] not in response.text
