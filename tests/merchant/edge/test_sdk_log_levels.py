"""A client's mistake the a2a-sdk answers (no JSON-RPC request, params that do not parse, push notifications
the card does not declare) is a WARNING line without a traceback, the SDK's words kept (issue 28)."""

from __future__ import annotations

import logging
import uuid

import httpx
import pytest

from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
from tests.fixtures.deadlines import HANG_S

_HEADERS = {"A2A-Version": "1.0", "content-type": "application/json"}


async def test_the_sdks_lines_about_a_clients_mistake_are_warnings(
    shared_merchant: str, caplog: pytest.LogCaptureFixture
) -> None:
    bodies = [
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": 5}',
        b'{"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": {"not": "a string"}}}',
    ]
    with caplog.at_level(logging.WARNING, logger="a2a"):
        async with httpx.AsyncClient(base_url=shared_merchant, headers=_HEADERS, timeout=HANG_S) as http:
            answers = [(await http.post(JSONRPC_PATH, content=body)).json() for body in bodies]
            push = await http.post(
                f"{REST_PATH}/tasks/{uuid.uuid4()}/pushNotificationConfigs",
                json={"url": "https://h.example/a"},
            )

    assert [answer["error"]["code"] for answer in answers] == [-32600, -32602]
    assert push.status_code == 400
    lines = {
        (record.levelname, record.getMessage().split(":")[0], record.exc_info is None)
        for record in caplog.records
        if record.name.startswith("a2a.server.")
    }
    assert lines >= {
        ("WARNING", "Failed to validate base JSON-RPC request", True),
        ("WARNING", "Failed to parse request params", True),
        ("WARNING", "Validation failure", True),
    }
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
