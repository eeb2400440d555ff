"""`x402-facilitator serve` with `X402_LOG_FORMAT=json` and `X402_ACCESS_LOG`: one JSON object a line, a
startup line with address, version, network and relayer address (never its key), a line per request, and
one line when SIGTERM stops it (exit status 0). At DEBUG, settling EIP-3009 and Permit2 payments (`exact` and
`upto`, by allowance and by an EIP-2612 permit), no key and no signature (nor a permit's r or s) is logged."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ApiKeyStore
from a2a_x402.observability import service_version
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.commands import assert_no_secret
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.servers import free_port, wait_answering

from .permit2_chain import funded_payer, permit2_requirements, sdk_sign, verify_body

CLI = str(Path(sys.executable).parent / "x402-facilitator")
REPO_ROOT = Path(__file__).resolve().parents[2]


def _serve_env(chain: DevChain, sqlite_url: str, port: int) -> dict[str, str]:
    """The environment of a facilitator serving `chain` on `port`, access log on, no X402_* of the caller."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("X402_")},
        "PYTHONPATH": str(REPO_ROOT),
        "X402_RPC_URL": chain.rpc_url,
        "X402_NETWORK": chain.network,
        "X402_RELAYER_KEY": chain.relayer_key,
        "X402_DATABASE_URL": sqlite_url,
        "X402_PORT": str(port),
        "X402_ACCESS_LOG": "1",
    }


async def test_json_logs_of_a_serving_facilitator(chain: DevChain, sqlite_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = {**_serve_env(chain, sqlite_url, port), "X402_LOG_FORMAT": "json"}
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            CLI, "serve", env=env, stdout=log, stderr=log, cwd=tmp_path
        )
    try:
        url = f"http://127.0.0.1:{port}"
        await wait_answering(url + "/readyz", running=lambda: process.returncode is None, what="facilitator")
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 15)
    text = log_path.read_text()

    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    [startup] = [line for line in lines if line["message"].startswith("facilitator ")]
    assert {key: startup[key] for key in ("level", "address", "version", "network", "relayer")} == {
        "level": "INFO",
        "address": f"127.0.0.1:{port}",
        "version": service_version(),
        "network": chain.network,
        "relayer": Account.from_key(chain.relayer_key).address,
    }
    assert [line["path"] for line in lines if line["logger"] == "x402.access"][-1] == "/readyz"
    # SIGTERM is a graceful stop, said in one line: no exit status 143, no traceback.
    assert process.returncode == 0
    [stopped] = [line for line in lines if "stopped" in line["message"]]
    assert (stopped["level"], stopped["message"]) == (
        "INFO",
        "x402-facilitator stopped by SIGTERM: requests in flight were finished",
    )
    key = chain.relayer_key.removeprefix("0x")
    assert all(key[i : i + 8] not in text for i in range(len(key) - 7))


async def test_debug_logs_of_a_settling_facilitator_hold_no_key_and_no_signature(
    chain: DevChain, sqlite_url: str, tmp_path: Path, new_payer: Callable[..., str]
) -> None:
    port = free_port()
    env = {**_serve_env(chain, sqlite_url, port), "X402_LOG_LEVEL": "DEBUG"}
    # The door admits only a caller with an API key (X402_FACILITATOR_PUBLIC is off): the merchant's, which
    # the DEBUG log must not hold either.
    engine = create_engine(sqlite_url)
    try:
        _record, api_key = await ApiKeyStore(engine).create("merchant")
    finally:
        await engine.dispose()
    requirements = make_requirements(chain)
    payloads = [sign_payment(new_payer(), requirements), sign_payment(chain.new_payer(1), requirements)]
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            CLI, "serve", env=env, stdout=log, stderr=log, cwd=tmp_path
        )
    try:
        url = f"http://127.0.0.1:{port}"
        await wait_answering(url + "/readyz", running=lambda: process.returncode is None, what="facilitator")
        headers = {"authorization": f"Bearer {api_key}"}
        async with httpx.AsyncClient(base_url=url, timeout=HANG_S, headers=headers) as client:
            answers = []
            for payload in payloads:
                body = {
                    "x402Version": 2,
                    "paymentPayload": payload.to_json_dict(),
                    "paymentRequirements": requirements.to_json_dict(),
                }
                answers.append((await client.post("/verify", json=body)).json())
                answers.append((await client.post("/settle", json=body)).json())
            # No API docs on the facilitator either (issue 25): it is plain Starlette, none are served.
            docs = {
                path: (await client.get(path)).status_code for path in ("/docs", "/redoc", "/openapi.json")
            }
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 15)
    text = log_path.read_text()

    assert [answer.get("isValid", answer.get("success")) for answer in answers] == [True, True, False, False]
    assert " DEBUG " in text and "/settle" in text  # DEBUG was on, the requests were logged
    assert docs == {"/docs": 404, "/redoc": 404, "/openapi.json": 404}
    known = {"relayer key": chain.relayer_key.removeprefix("0x"), "API key": api_key}
    known |= {
        f"signature {n}": payload.payload.signature.removeprefix("0x") for n, payload in enumerate(payloads)
    }
    assert_no_secret([text], known)


async def test_debug_logs_hold_no_permit2_or_eip2612_signature(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **_serve_env(chain, sqlite_url, port),
        "X402_LOG_LEVEL": "DEBUG",
        "X402_FACILITATOR_PUBLIC": "true",
    }
    # `exact` by Permit2 and `upto`, of the plain ERC-20 by the payer's allowance and of the EIP-2612 token
    # by a permit of Permit2 riding in the payment (`eip2612GasSponsoring`).
    cases = [
        (scheme, asset) for asset in (chain.plain_asset, chain.permit_asset) for scheme in ("exact", "upto")
    ]
    signed = []
    for scheme, asset in cases:
        asked = permit2_requirements(chain, scheme, asset)
        sponsored = asset == chain.permit_asset
        key = funded_payer(chain, asset, approved=not sponsored)
        signed.append((sdk_sign(chain, key, asked, eip2612=sponsored), asked))
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            CLI, "serve", env=env, stdout=log, stderr=log, cwd=tmp_path
        )
    try:
        url = f"http://127.0.0.1:{port}"
        await wait_answering(url + "/readyz", running=lambda: process.returncode is None, what="facilitator")
        async with httpx.AsyncClient(base_url=url, timeout=HANG_S) as client:
            answers = []
            for payment, asked in signed:
                charged = asked if asked.scheme == "exact" else asked.model_copy(update={"amount": 1})
                answers.append((await client.post("/verify", json=verify_body(payment, asked))).json())
                answers.append((await client.post("/settle", json=verify_body(payment, charged))).json())
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 15)
    text = log_path.read_text()

    assert [answer.get("isValid", answer.get("success")) for answer in answers] == [True] * 8, answers
    assert " DEBUG " in text and "/settle" in text  # DEBUG was on, the requests were logged
    signatures = {f"Permit2 signature {n}": p["payload"]["signature"] for n, (p, _) in enumerate(signed)}
    signatures |= {
        f"EIP-2612 signature {n}": p["extensions"]["eip2612GasSponsoring"]["info"]["signature"]
        for n, (p, _) in enumerate(signed)
        if "extensions" in p
    }
    assert len(signatures) == 6
    known = {name: signature.removeprefix("0x") for name, signature in signatures.items()}
    # Its r and s apart too: the proxy's `settleWithPermit` takes the permit as (value, deadline, r, s, v).
    known |= {f"{name} r": value[:64] for name, value in known.items()}
    known |= {f"{name} s": value[64:128] for name, value in known.items() if not name.endswith(" r")}
    known |= {"relayer key": chain.relayer_key.removeprefix("0x")}
    assert_no_secret([text], known)
