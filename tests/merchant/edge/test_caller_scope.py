"""Callers and their tasks on every binding (JSON-RPC, HTTP+JSON, gRPC; A2A 1.0 and 0.3), real servers.

An authenticated stranger (another key of the same tenant) reaches nothing of a caller's task: every
operation is TaskNotFound and its list is empty, and the task is unchanged. Anonymous callers reach a task
by its id only, list only within a context they name, and start tasks only in contexts the server issued;
the task and context ids the server hands out are UUID4s (122 random bits), so they work as capabilities.
A refused credential is HTTP 401 / gRPC UNAUTHENTICATED, the same for every reason, and changes nothing.
No token is ever in a log line.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from a2a_x402.merchant.callers import CallerKeys, JwtIssuer
from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
from a2a_x402.merchant.edge._authn import REFUSED_MESSAGE
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.storage import create_engine
from tests.fixtures.a2a_grpc import GrpcCalls
from tests.fixtures.jwt_issuer import AUDIENCE, Issuer
from tests.fixtures.merchant import A2ACallError
from tests.fixtures.servers import free_port
from tests.fixtures.wire_v0_3 import WireV0_3, message_v0_3

from .conftest import PAY_TO, TENANT_A, TENANT_B, a2a_http, a2a_http_as, issue_key, running_merchant
from .wire import JSON, Wire, binding, mid, start_quote, user_message

WIRES = ("jsonrpc", "rest", "grpc")


class GrpcWire:
    """The `Wire` methods over gRPC."""

    name = "grpc"

    def __init__(self, http: httpx.AsyncClient, tenant: str = "") -> None:
        self._calls = GrpcCalls(http, tenant)

    async def send(self, message: JSON, configuration: JSON | None = None) -> JSON:
        params: JSON = {"message": message}
        if configuration is not None:
            params["configuration"] = configuration
        return await self._calls.call("SendMessage", params)

    async def get_task(self, task_id: str) -> JSON:
        return await self._calls.call("GetTask", {"id": task_id})

    async def list_tasks(self, **params: Any) -> JSON:
        return await self._calls.call("ListTasks", params)

    async def cancel(self, task_id: str) -> JSON:
        return await self._calls.call("CancelTask", {"id": task_id})

    def subscribe(self, task_id: str) -> AbstractAsyncContextManager[AsyncIterator[JSON]]:
        return self._calls.stream("SubscribeToTask", {"id": task_id})


def wire_of(name: str, http: httpx.AsyncClient, tenant: str = "") -> Wire | GrpcWire:
    """The binding `name` ("jsonrpc", "rest" or "grpc") for `tenant`."""
    return GrpcWire(http, tenant) if name == "grpc" else binding(name, http, tenant)


def make_tenants() -> TenantRegistry:
    """The default tenant and TENANT_A accept anonymous callers; TENANT_B does not."""
    return TenantRegistry(
        Tenant(id=tenant_id, pay_to=pay_to, price=1000, anonymous_callers=tenant_id != TENANT_B)
        for tenant_id, pay_to in PAY_TO.items()
    )


@pytest.fixture
def base_url(sqlite_url: str) -> Iterator[str]:
    """A merchant on SQLite serving gRPC too, with the tenants of `make_tenants`."""
    with running_merchant(sqlite_url, grpc_port=free_port(), tenants=make_tenants()) as url:
        yield url


@pytest.fixture(params=WIRES)
def wire_name(request: pytest.FixtureRequest) -> str:
    """Each binding in turn, gRPC included."""
    name: str = request.param
    return name


async def stored_tasks(database_url: str) -> list[tuple[str, str, str]]:
    """(id, owner, state) of every stored task."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(text("SELECT id, owner, status FROM tasks ORDER BY id"))
            return [(row[0], row[1], str(row[2])) for row in rows]
    finally:
        await engine.dispose()


async def expect_not_found(call: Any) -> None:
    """`call` (an awaitable) fails with TaskNotFound."""
    with pytest.raises(A2ACallError) as failure:
        await call
    assert failure.value.reason == "TASK_NOT_FOUND", failure.value


async def test_an_authenticated_stranger_reaches_nothing_of_anothers_task(
    wire_name: str, base_url: str, sqlite_url: str
) -> None:
    alice_key = await issue_key(sqlite_url, "", "alice")
    bob_key = await issue_key(sqlite_url, "", "bob")
    async with (
        a2a_http_as(base_url, alice_key) as alice_http,
        a2a_http_as(base_url, bob_key) as bob_http,
        a2a_http(base_url) as anonymous_http,
    ):
        alice = wire_of(wire_name, alice_http)
        task = await start_quote(alice)  # type: ignore[arg-type]
        before = await stored_tasks(sqlite_url)

        for stranger in (wire_of(wire_name, bob_http), wire_of(wire_name, anonymous_http)):
            await expect_not_found(stranger.get_task(task["id"]))
            await expect_not_found(stranger.cancel(task["id"]))
            await expect_not_found(stranger.send(user_message("S", message_id=mid(), task_id=task["id"])))
            with pytest.raises(A2ACallError) as failure:
                async with stranger.subscribe(task["id"]) as events:
                    [event async for event in events]
            assert failure.value.reason == "TASK_NOT_FOUND"
            assert (await stranger.list_tasks()).get("tasks", []) == []
            assert (await stranger.list_tasks(contextId=task["contextId"])).get("tasks", []) == []

        assert await stored_tasks(sqlite_url) == before
        assert await alice.get_task(task["id"]) == task
        assert [t["id"] for t in (await alice.list_tasks())["tasks"]] == [task["id"]]
        done = await alice.send(user_message("S", message_id=mid(), task_id=task["id"]))
        assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_an_anonymous_caller_reaches_a_task_by_its_id_and_lists_only_a_named_context(
    wire_name: str, base_url: str, sqlite_url: str
) -> None:
    async with a2a_http(base_url) as first_http, a2a_http(base_url) as second_http:
        first, second = wire_of(wire_name, first_http), wire_of(wire_name, second_http)
        task = await start_quote(first)  # type: ignore[arg-type]

        assert (await first.list_tasks()).get("tasks", []) == []  # nothing without a contextId
        assert [t["id"] for t in (await second.list_tasks(contextId=task["contextId"]))["tasks"]] == [
            task["id"]
        ]
        assert await second.get_task(task["id"]) == task  # the id is the capability

        followed = await second.send(user_message("hello", message_id=mid(), context_id=task["contextId"]))
        assert followed["task"]["contextId"] == task["contextId"]

        before = await stored_tasks(sqlite_url)
        with pytest.raises(A2ACallError) as failure:
            await first.send(user_message("hello", message_id=mid(), context_id=str(uuid.uuid4())))
        assert failure.value.reason == "INVALID_PARAMS"
        assert "context the server issued" in failure.value.message
        assert await stored_tasks(sqlite_url) == before


async def test_an_authenticated_callers_context_is_no_anonymous_capability(
    base_url: str, sqlite_url: str
) -> None:
    async with (
        a2a_http_as(base_url, await issue_key(sqlite_url, "", "alice")) as alice_http,
        a2a_http(base_url) as anonymous_http,
    ):
        task = await start_quote(binding("jsonrpc", alice_http))
        anonymous = binding("jsonrpc", anonymous_http)
        # Alice's context holds none of the anonymous owner's tasks: it is unknown to anonymous callers.
        with pytest.raises(A2ACallError) as failure:
            await anonymous.send(user_message("hello", message_id=mid(), context_id=task["contextId"]))
        assert failure.value.reason == "INVALID_PARAMS"


def assert_uuid4(*ids: str) -> None:
    """Each id is a UUID4: 122 random bits, so an anonymous caller's id works as a capability."""
    for value in ids:
        assert uuid.UUID(value).version == 4, value


async def test_the_task_and_context_ids_handed_out_are_uuid4(wire_name: str, base_url: str) -> None:
    async with a2a_http(base_url) as http:
        wire = wire_of(wire_name, http)
        first, second = await start_quote(wire), await start_quote(wire)  # type: ignore[arg-type]
    assert_uuid4(first["id"], first["contextId"], second["id"], second["contextId"])
    assert len({first["id"], first["contextId"], second["id"], second["contextId"]}) == 4


@pytest.mark.parametrize("binding_v0_3", ["jsonrpc", "rest"])
@pytest.mark.parametrize("tenant", ["", TENANT_A])
async def test_the_0_3_task_and_context_ids_handed_out_are_uuid4(
    binding_v0_3: str, tenant: str, base_url: str
) -> None:
    async with WireV0_3.client(base_url) as http:
        task = await WireV0_3(http, binding_v0_3, tenant).send(message_v0_3("quote"))
    assert_uuid4(task["id"], task["contextId"])


REFUSED = ("x402k_" + "A" * 43, "Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer not.a.jwt", "Bearer e30.e30.e30")


async def assert_refused_http(http: httpx.AsyncClient, authorization: str) -> None:
    """Every A2A route answers 401 with the Bearer challenge and the same body."""
    headers = {"Authorization": authorization}
    message, v0_3 = user_message("hello", message_id=mid()), message_v0_3("x")
    answers = [
        await http.post(
            JSONRPC_PATH,
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
            headers=headers,
        ),
        await http.post(f"{REST_PATH}/message:send", json={"message": message}, headers=headers),
        await http.get(f"{REST_PATH}/{TENANT_A}/tasks", headers=headers),
        await http.post(  # 0.3 at the root, and under a tenant's root
            JSONRPC_PATH,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {"message": v0_3},
            },
            headers={**headers, "A2A-Version": ""},
        ),
        await http.post(f"/t/{TENANT_A}/a2a/jsonrpc", json={}, headers={**headers, "A2A-Version": ""}),
        await http.get(f"/t/{TENANT_A}{REST_PATH}/v1/tasks/x", headers={**headers, "A2A-Version": ""}),
    ]
    for answer in answers:
        assert answer.status_code == 401, (answer.request.url, answer.text)
        assert answer.headers["www-authenticate"] == 'Bearer realm="a2a", error="invalid_token"'
        assert answer.json() == answers[0].json()


async def test_a_refused_credential_is_401_or_unauthenticated_and_changes_nothing(
    base_url: str, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    revoked = await issue_key(sqlite_url, "", "carol")
    engine = create_engine(sqlite_url)
    try:
        await CallerKeys(engine).revoke("", "carol")
    finally:
        await engine.dispose()
    async with a2a_http(base_url) as http:
        for authorization in (*REFUSED, f"Bearer {revoked}", f"bearer {revoked}"):
            await assert_refused_http(http, authorization)
            grpc_http = a2a_http(base_url)
            grpc_http.headers["Authorization"] = authorization
            async with grpc_http:
                with pytest.raises(A2ACallError) as failure:
                    await GrpcWire(grpc_http).send(user_message("hello", message_id=mid()))
            assert failure.value.grpc_status == "UNAUTHENTICATED"
            assert failure.value.message == "the credential presented is not valid"
    assert await stored_tasks(sqlite_url) == []
    assert revoked not in caplog.text and revoked[6:] not in caplog.text


async def test_a_token_is_never_logged(
    base_url: str, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = await issue_key(sqlite_url, "", "dave")
    async with a2a_http_as(base_url, key) as http:
        for name in WIRES:
            wire = wire_of(name, http)
            task = await start_quote(wire)  # type: ignore[arg-type]
            await wire.get_task(task["id"])
            await wire.list_tasks()
        await assert_refused_http(http, f"Bearer {key}x")
    assert "credential refused" in caplog.text  # the refusals were logged, without the token
    assert key[6:20] not in caplog.text


async def test_a_tenant_without_anonymous_callers_refuses_them_and_foreign_keys(
    wire_name: str, base_url: str, sqlite_url: str
) -> None:
    own = await issue_key(sqlite_url, TENANT_B, "erin")
    foreign = await issue_key(sqlite_url, TENANT_A, "frank")
    async with (
        a2a_http(base_url) as anonymous_http,
        a2a_http_as(base_url, foreign) as foreign_http,
        a2a_http_as(base_url, own) as own_http,
    ):
        for http in (anonymous_http, foreign_http):
            refused = wire_of(wire_name, http, TENANT_B)
            with pytest.raises(A2ACallError) as failure:
                await refused.send(user_message("hello", message_id=mid()))
            assert failure.value.reason == "INVALID_REQUEST"
            with pytest.raises(A2ACallError):
                await refused.list_tasks()
        assert await stored_tasks(sqlite_url) == []
        task = await start_quote(wire_of(wire_name, own_http, TENANT_B))  # type: ignore[arg-type]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


@pytest.mark.parametrize("binding_v0_3", ["jsonrpc", "rest"])
@pytest.mark.parametrize("tenant", ["", TENANT_A])
async def test_0_3_callers_reach_only_their_own_tasks(
    binding_v0_3: str, tenant: str, base_url: str, sqlite_url: str
) -> None:
    alice_http, bob_http = WireV0_3.client(base_url), WireV0_3.client(base_url)
    alice_http.headers["Authorization"] = f"Bearer {await issue_key(sqlite_url, tenant, 'alice')}"
    bob_http.headers["Authorization"] = f"Bearer {await issue_key(sqlite_url, tenant, 'bob')}"
    async with alice_http, bob_http:
        alice, bob = WireV0_3(alice_http, binding_v0_3, tenant), WireV0_3(bob_http, binding_v0_3, tenant)
        task = await alice.send(message_v0_3("quote"))
        seen = await alice.get_task(task["id"])
        assert seen["id"] == task["id"]
        with pytest.raises(A2ACallError) as failure:
            await bob.get_task(task["id"])
        assert failure.value.rpc_code == -32001 or failure.value.http_status == 404
        with pytest.raises(A2ACallError) as failure:
            await bob.cancel(task["id"])
        assert failure.value.rpc_code == -32001 or failure.value.http_status == 404
        assert await alice.get_task(task["id"]) == seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=200))
async def test_no_made_up_token_authenticates(token: str, base_url: str) -> None:
    async with a2a_http(base_url) as http:
        answer = await http.get(f"{REST_PATH}/tasks", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    assert answer.json() == {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": REFUSED_MESSAGE}}


async def test_bearer_jwts_of_a_trusted_issuer_on_every_binding(
    wire_name: str, sqlite_url: str, jwt_issuer: Issuer
) -> None:
    trusted = JwtIssuer(issuer=jwt_issuer.url, audience=AUDIENCE, jwks_url=jwt_issuer.jwks_url)
    with running_merchant(sqlite_url, grpc_port=free_port(), jwt_issuers=[trusted]) as url:
        async with (
            a2a_http_as(url, jwt_issuer.token("svc-a")) as owner_http,
            a2a_http_as(url, jwt_issuer.token("svc-b")) as stranger_http,
        ):
            owner, stranger = wire_of(wire_name, owner_http), wire_of(wire_name, stranger_http)
            task = await start_quote(owner)  # type: ignore[arg-type]
            await expect_not_found(stranger.get_task(task["id"]))
            await expect_not_found(stranger.cancel(task["id"]))
            assert (await stranger.list_tasks()).get("tasks", []) == []
            assert [t["id"] for t in (await owner.list_tasks())["tasks"]] == [task["id"]]
        expired = jwt_issuer.token("svc-a", exp=int(time.time()) - 3600)
        async with a2a_http_as(url, expired) as expired_http:
            if wire_name == "grpc":
                with pytest.raises(A2ACallError) as failure:
                    await GrpcWire(expired_http).get_task(task["id"])
                assert failure.value.grpc_status == "UNAUTHENTICATED"
            else:
                await assert_refused_http(expired_http, f"Bearer {expired}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(guess=st.one_of(st.uuids().map(str), st.text(min_size=1, max_size=36)))
async def test_no_guessed_id_reaches_or_lists_a_task(guess: str, base_url: str) -> None:
    async with a2a_http(base_url) as owner_http, a2a_http(base_url) as guesser_http:
        task = await start_quote(binding("rest", owner_http))
        guesser = binding("jsonrpc", guesser_http)
        if guess not in (task["id"], task["contextId"]):
            await expect_not_found(guesser.get_task(guess))
            assert (await guesser.list_tasks(contextId=guess)).get("tasks", []) == []
        assert (await guesser.list_tasks()).get("tasks", []) == []
