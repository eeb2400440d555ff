"""`x402-merchant serve` as an operator runs it: with `X402_GRPC_PORT` the gRPC binding starts and stops
with the HTTP one, on `X402_HOST`, and the card lists it; with `X402_API_TOKEN` the default tenant's billing
API is open to that token, and the CLI names the default tenant as the API does (`default`)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import grpc.aio
import pytest
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.merchant.settings import MerchantSettings
from tests.faults.processes import merchant_processes
from tests.fixtures.a2a_grpc import a2a_stub
from tests.fixtures.commands import run_command
from tests.fixtures.merchant import offered_terms
from tests.fixtures.servers import free_port


async def test_serve_runs_grpc_beside_http(chain: DevChain, sqlite_url: str, tmp_path: Path) -> None:
    port = free_port()
    with merchant_processes(chain, sqlite_url, tmp_path) as processes:
        merchant = await processes.start(grpc_port=port)
        async with merchant.http() as http:
            card = (await http.get("/.well-known/agent-card.json")).json()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = a2a_stub(channel)
            message = a2a_pb2.Message(
                message_id="m-1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="one two three")]
            )
            metadata = (("a2a-version", "1.0"), ("a2a-extensions", EXTENSION_URI))
            asked = await stub.SendMessage(a2a_pb2.SendMessageRequest(message=message), metadata=metadata)
        merchant.stop()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as stopped:
                await a2a_stub(channel).GetTask(
                    a2a_pb2.GetTaskRequest(id=asked.task.id), metadata=metadata, timeout=5
                )

    assert {"url": f"127.0.0.1:{port}", "protocolBinding": "GRPC", "protocolVersion": "1.0"} in card[
        "supportedInterfaces"
    ]
    assert asked.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert offered_terms(MessageToDict(asked.task)).accepts
    assert stopped.value.code() == grpc.StatusCode.UNAVAILABLE


def test_the_grpc_port_is_off_unless_set_and_differs_from_the_http_port() -> None:
    base = {"asset": "0x" + "11" * 20, "pay_to": "0x" + "22" * 20, "_env_file": None}
    assert MerchantSettings(**base).grpc_port is None  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="X402_GRPC_PORT"):
        MerchantSettings(**base, port=9000, grpc_port=9000)  # type: ignore[arg-type]


async def test_the_default_tenant_has_an_api_token_from_the_environment_and_one_name(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    with merchant_processes(chain, sqlite_url, tmp_path) as processes:
        merchant = await processes.start()
        token = merchant.env["X402_API_TOKEN"]
        async with merchant.http() as http:
            served = await http.get(
                "/tenants/default/ledger/balance", headers={"Authorization": f"Bearer {token}"}
            )
            anonymous = await http.get("/tenants/default/ledger/balance")
            wrong = await http.get(
                "/tenants/default/ledger/balance", headers={"Authorization": "Bearer " + "x" * 32}
            )
        merchant.stop()
    by_name = await run_command(
        ["x402-merchant", "ledger", "balance", "--tenant", "default", "--format", "json"],
        cwd=tmp_path,
        env={"X402_DATABASE_URL": sqlite_url},
    )

    assert served.status_code == 200, served.text
    assert (anonymous.status_code, wrong.status_code) == (401, 401)
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout) == served.json()
