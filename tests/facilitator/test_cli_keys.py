"""`x402-facilitator keys create|list|revoke` and `serve`'s door, as real processes: a key is printed once
(alone on stdout) and never listed, works at once against a running `serve` and stops working when revoked;
`serve` says in one line how to create a key when there is none, and that it is public when it is."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson

from a2a_x402.devchain import DevChain
from a2a_x402.payer import sign_payment
from tests.fixtures.commands import assert_no_secret
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.facilitator_processes import CLI, facilitator_process_env, facilitator_processes

from .payments import claim_rows

_KEY = re.compile(r"^x402f_([0-9a-f]{16})_[A-Za-z0-9_-]{43}$")


async def _run(
    chain: DevChain, database_url: str, cwd: Path, *args: str, **extra: str
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        CLI,
        *args,
        env=facilitator_process_env(chain, database_url, **extra),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_keys_are_created_once_listed_without_secret_and_revoked_at_once(
    chain: DevChain, sqlite_url: str, new_payer: Callable[..., str], tmp_path: Path
) -> None:
    code, key_out, key_err = await _run(chain, sqlite_url, tmp_path, "keys", "create", "--name", "merchant")
    key = key_out.strip()
    match = _KEY.match(key)
    assert code == 0 and match, key_err
    key_id = match[1]
    assert key_id in key_err and key not in key_err
    _, listed, _ = await _run(chain, sqlite_url, tmp_path, "keys", "list")
    assert key_id in listed and "merchant" in listed and "live" in listed
    assert key.rsplit("_", 1)[1][:8] not in listed
    requirements = make_requirements(chain)
    body = orjson.dumps(
        {
            "x402Version": 2,
            "paymentPayload": sign_payment(new_payer(), requirements).to_json_dict(),
            "paymentRequirements": requirements.to_json_dict(),
        }
    )
    headers = {"content-type": "application/json"}

    async with facilitator_processes(chain, tmp_path) as processes:
        served = await processes.serve(sqlite_url, X402_FACILITATOR_PUBLIC="false")
        async with httpx.AsyncClient(base_url=served.url, timeout=HANG_S) as http:
            verified = await http.post(
                "/verify", content=body, headers={**headers, "authorization": f"Bearer {key}"}
            )
            code, _, _ = await _run(chain, sqlite_url, tmp_path, "keys", "revoke", key_id)
            revoked = await http.post(
                "/settle", content=body, headers={**headers, "authorization": f"Bearer {key}"}
            )
        log = served.log()

    assert verified.status_code == 200 and verified.json()["isValid"] is True
    assert code == 0
    assert revoked.status_code == 401
    assert await claim_rows(sqlite_url) == []
    assert "no API key yet" not in log and key.rsplit("_", 1)[1][:8] not in log
    _, listed, _ = await _run(chain, sqlite_url, tmp_path, "keys", "list")
    assert "revoked" in listed


async def test_keys_mistakes_are_one_line(chain: DevChain, sqlite_url: str, tmp_path: Path) -> None:
    unknown = await _run(chain, sqlite_url, tmp_path, "keys", "revoke", "0123456789abcdef")
    bad_address = await _run(chain, sqlite_url, tmp_path, "keys", "create", "--name", "x", "--pay-to", "0x12")
    empty = await _run(chain, sqlite_url, tmp_path, "keys", "list")

    assert unknown[0] == 2 and "there is no live key 0123456789abcdef" in unknown[2]
    assert len(unknown[2].strip().splitlines()) == 1
    assert bad_address[0] == 2 and "is not a 0x-prefixed 20-byte hex address" in bad_address[2]
    assert empty[0] == 0 and "keys create" in empty[1]


async def test_serve_says_how_to_create_a_key_or_that_it_is_public(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    async with facilitator_processes(chain, tmp_path) as processes:
        private = await processes.serve(sqlite_url, X402_FACILITATOR_PUBLIC="false")
        public = await processes.serve(sqlite_url, X402_FACILITATOR_PUBLIC="true")
        async with httpx.AsyncClient(timeout=HANG_S) as http:
            refused = await http.post(private.url + "/settle", content=b"{}")
            supported = await http.get(private.url + "/supported")

    private_lines = [line for line in private.log().splitlines() if "API key" in line]
    assert len(private_lines) == 1 and "x402-facilitator keys create" in private_lines[0]
    assert "public facilitator (X402_FACILITATOR_PUBLIC)" in public.log()
    assert refused.status_code == 401 and "keys create" in refused.json()["errorMessage"]
    assert supported.status_code == 200


async def test_a_key_appears_only_in_its_create_output_at_debug(
    chain: DevChain, sqlite_url: str, new_payer: Callable[..., str], tmp_path: Path
) -> None:
    """At `X402_LOG_LEVEL=DEBUG` everywhere: the key is `keys create`'s stdout and nothing else, not its
    log, not `keys list`, not the service's log (access log on) nor any of its answers, right key or
    wrong."""
    debug = {"X402_LOG_LEVEL": "DEBUG"}
    code, key_out, key_err = await _run(
        chain, sqlite_url, tmp_path, "keys", "create", "--name", "merchant", **debug
    )
    key = key_out.strip()
    assert code == 0 and _KEY.match(key) and key_out == key + "\n", key_err
    secret = {"API key": key.rsplit("_", 1)[1]}
    outputs = [key_err, *(await _run(chain, sqlite_url, tmp_path, "keys", "list", **debug))[1:]]
    requirements = make_requirements(chain)
    body = orjson.dumps(
        {
            "x402Version": 2,
            "paymentPayload": sign_payment(new_payer(), requirements).to_json_dict(),
            "paymentRequirements": requirements.to_json_dict(),
        }
    )
    wrong = key[:-6] + ("AAAAAA" if not key.endswith("AAAAAA") else "BBBBBB")

    async with facilitator_processes(chain, tmp_path) as processes:
        served = await processes.serve(
            sqlite_url, X402_FACILITATOR_PUBLIC="false", X402_ACCESS_LOG="true", **debug
        )
        async with httpx.AsyncClient(base_url=served.url, timeout=HANG_S) as http:
            for path in ("/verify", "/settle", "/settle/status"):
                for presented in (key, wrong):
                    answer = await http.post(
                        path,
                        content=body,
                        headers={
                            "content-type": "application/json",
                            "authorization": f"Bearer {presented}",
                            "idempotency-key": "k-1",
                        },
                    )
                    outputs.append(answer.text + str(answer.headers))
            for path in ("/metrics", "/readyz", "/supported"):
                outputs.append((await http.get(path)).text)
        log = served.log()

    assert "/settle/status" in log  # the service logged every request (access log, DEBUG)
    assert_no_secret([*outputs, log], secret)
