"""The official a2a-sdk 1.3 client authenticating with each scheme the card declares (its `AuthInterceptor`
reading `securityRequirements`), on every binding: the owner reaches its task, another caller does not."""

from __future__ import annotations

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, InMemoryContextCredentialStore
from a2a.helpers import new_text_message
from a2a.types import GetTaskRequest, ListTasksRequest, Role, SendMessageRequest, TaskState
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import TaskNotFoundError

from a2a_x402.merchant.callers import API_KEY_SCHEME, JWT_SCHEME, JwtIssuer
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.jwt_issuer import AUDIENCE, Issuer
from tests.fixtures.servers import free_port

from .conftest import issue_key, running_merchant
from .test_client import tenant_card

BINDINGS = {
    "jsonrpc": TransportProtocol.JSONRPC.value,
    "rest": TransportProtocol.HTTP_JSON.value,
    "grpc": TransportProtocol.GRPC.value,
}


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("scheme", [API_KEY_SCHEME, JWT_SCHEME])
async def test_the_sdk_client_authenticates_with_each_declared_scheme(
    binding: str, scheme: str, sqlite_url: str, jwt_issuer: Issuer
) -> None:
    trusted = JwtIssuer(issuer=jwt_issuer.url, audience=AUDIENCE, jwks_url=jwt_issuer.jwks_url)
    with running_merchant(sqlite_url, grpc_port=free_port(), jwt_issuers=[trusted]) as url:
        if scheme == API_KEY_SCHEME:
            owner, stranger = await issue_key(sqlite_url, "", "alice"), await issue_key(sqlite_url, "", "bob")
        else:
            owner, stranger = jwt_issuer.token("svc-a"), jwt_issuer.token("svc-b")
        credentials = InMemoryContextCredentialStore()
        await credentials.set_credentials("owner", scheme, owner)
        await credentials.set_credentials("stranger", scheme, stranger)
        as_owner = ClientCallContext(state={"sessionId": "owner"})
        as_stranger = ClientCallContext(state={"sessionId": "stranger"})
        async with httpx.AsyncClient(timeout=HANG_S, headers={"A2A-Version": "1.0"}) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            declared = {name for requirement in card.security_requirements for name in requirement.schemes}
            assert scheme in declared
            config = ClientConfig(
                httpx_client=http,
                supported_protocol_bindings=[BINDINGS[binding]],
                streaming=False,
                grpc_channel_factory=grpc.aio.insecure_channel,
            )
            client = ClientFactory(config).create(tenant_card(card, ""), [AuthInterceptor(credentials)])
            try:
                request = SendMessageRequest(message=new_text_message("quote", role=Role.ROLE_USER))
                events = [event async for event in client.send_message(request, context=as_owner)]
                task = events[-1].task
                assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

                assert (await client.get_task(GetTaskRequest(id=task.id), context=as_owner)).id == task.id
                listed = await client.list_tasks(ListTasksRequest(), context=as_owner)
                assert [t.id for t in listed.tasks] == [task.id]
                with pytest.raises(TaskNotFoundError):
                    await client.get_task(GetTaskRequest(id=task.id), context=as_stranger)
                assert not (await client.list_tasks(ListTasksRequest(), context=as_stranger)).tasks
            finally:
                await client.close()
