"""The a2a-sdk 0.3.26 client (`.venv-compat`) presenting each credential the 0.3 card declares (an API key,
a bearer JWT of a trusted issuer) on the A2A 0.3 interfaces: the owner reads its task, and another caller's
client gets TaskNotFound, not the task.

The client finds the scheme by the name the card declares it under (`AuthInterceptor` with a credential
store); the SDK's 0.3 HTTP+JSON transport runs no interceptors, so there the call context carries the
header itself.
"""

from __future__ import annotations

import pytest

from a2a_x402.merchant.callers import API_KEY_SCHEME, JWT_SCHEME, JwtIssuer
from tests.fixtures.compat import CompatPython
from tests.fixtures.jwt_issuer import AUDIENCE, Issuer

from .conftest import issue_key, running_merchant

CALLERS_0_3 = """
import asyncio, json, sys, uuid
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, InMemoryContextCredentialStore
from a2a.client.middleware import ClientCallContext
from a2a.types import Message, Part, Role, TaskQueryParams, TextPart

given = json.load(sys.stdin)

def context_of(who):
    headers = {"Authorization": f"Bearer {given[who]}"}
    return ClientCallContext(state={"sessionId": who, "http_kwargs": {"headers": headers}}
                             if given["transport"] == "HTTP+JSON" else {"sessionId": who})

async def main():
    store = InMemoryContextCredentialStore()
    for who in ("owner", "stranger"):
        await store.set_credentials(who, given["scheme"], given[who])
    async with httpx.AsyncClient(timeout=120) as http:  # a hang guard, as HANG_S
        card = await A2ACardResolver(http, given["baseUrl"]).get_agent_card()
        config = ClientConfig(httpx_client=http, supported_transports=[given["transport"]], streaming=False)
        client = ClientFactory(config).create(card, interceptors=[AuthInterceptor(store)])
        owner, stranger = context_of("owner"), context_of("stranger")
        parts = [Part(root=TextPart(text="quote"))]
        text = Message(message_id=str(uuid.uuid4()), role=Role.user, parts=parts)
        events = [event async for event in client.send_message(text, context=owner)]
        task = events[-1][0]
        seen = await client.get_task(TaskQueryParams(id=task.id), context=owner)
        try:
            await client.get_task(TaskQueryParams(id=task.id), context=stranger)
            stranger_saw = "the task"
        except Exception as error:
            stranger_saw = type(error).__name__ + ": " + str(error)
        print(json.dumps({
            "declared": sorted(card.security_schemes or {}),
            "state": seen.status.state.value,
            "stranger": stranger_saw,
        }))

asyncio.run(main())
"""


async def _run(compat_python: CompatPython, url: str, transport: str, scheme: str, *tokens: str) -> None:
    owner, stranger = tokens
    seen = await compat_python.run(
        CALLERS_0_3,
        {"baseUrl": url, "transport": transport, "scheme": scheme, "owner": owner, "stranger": stranger},
    )
    assert scheme in seen["declared"], seen
    assert seen["state"] == "input-required"
    assert seen["stranger"] != "the task"
    assert "not found" in seen["stranger"].lower(), seen


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
async def test_the_0_3_client_presents_its_key_and_reaches_only_its_own_task(
    transport: str, sqlite_url: str, compat_python: CompatPython
) -> None:
    with running_merchant(sqlite_url) as url:
        owner, stranger = await issue_key(sqlite_url, "", "alice"), await issue_key(sqlite_url, "", "bob")
        await _run(compat_python, url, transport, API_KEY_SCHEME, owner, stranger)


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
async def test_the_0_3_client_presents_its_jwt_and_reaches_only_its_own_task(
    transport: str, sqlite_url: str, compat_python: CompatPython, jwt_issuer: Issuer
) -> None:
    trusted = JwtIssuer(issuer=jwt_issuer.url, audience=AUDIENCE, jwks_url=jwt_issuer.jwks_url)
    with running_merchant(sqlite_url, jwt_issuers=[trusted]) as url:
        tokens = jwt_issuer.token("svc-a"), jwt_issuer.token("svc-b")
        await _run(compat_python, url, transport, JWT_SCHEME, *tokens)
