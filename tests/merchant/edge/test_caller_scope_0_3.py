"""The a2a-sdk 0.3.26 client (`.venv-compat`) presenting an API key on the A2A 0.3 interfaces: the owner
reads its task, and another caller's client gets TaskNotFound, not the task."""

from __future__ import annotations

import pytest

from tests.fixtures.compat import CompatPython

from .conftest import issue_key, running_merchant

CALLERS_0_3 = """
import asyncio, json, sys, uuid
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, TaskQueryParams, TextPart

given = json.load(sys.stdin)

def client_for(http, card):
    config = ClientConfig(httpx_client=http, supported_transports=[given["transport"]], streaming=False)
    return ClientFactory(config).create(card)

async def main():
    bearer = lambda token: {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=30, headers=bearer(given["owner"])) as owner_http, \\
            httpx.AsyncClient(timeout=30, headers=bearer(given["stranger"])) as stranger_http:
        card = await A2ACardResolver(owner_http, given["baseUrl"]).get_agent_card()
        owner, stranger = client_for(owner_http, card), client_for(stranger_http, card)
        parts = [Part(root=TextPart(text="quote"))]
        text = Message(message_id=str(uuid.uuid4()), role=Role.user, parts=parts)
        events = [event async for event in owner.send_message(text)]
        task = events[-1][0]
        seen = await owner.get_task(TaskQueryParams(id=task.id))
        try:
            await stranger.get_task(TaskQueryParams(id=task.id))
            stranger_saw = "the task"
        except Exception as error:
            stranger_saw = type(error).__name__ + ": " + str(error)
        print(json.dumps({"state": seen.status.state.value, "stranger": stranger_saw}))

asyncio.run(main())
"""


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
async def test_the_0_3_client_presents_its_key_and_reaches_only_its_own_task(
    transport: str, sqlite_url: str, compat_python: CompatPython
) -> None:
    with running_merchant(sqlite_url) as url:
        owner, stranger = await issue_key(sqlite_url, "", "alice"), await issue_key(sqlite_url, "", "bob")
        seen = await compat_python.run(
            CALLERS_0_3, {"baseUrl": url, "transport": transport, "owner": owner, "stranger": stranger}
        )
    assert seen["state"] == "input-required"
    assert seen["stranger"] != "the task"
    assert "not found" in seen["stranger"].lower(), seen
