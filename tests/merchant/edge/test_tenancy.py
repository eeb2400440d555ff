"""Tenant scoping over real HTTP on both bindings: no tenant reaches another's tasks, unknown tenants change
nothing; and the owner key the task store is scoped by."""

from __future__ import annotations

import httpx
import pytest
from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.context import ServerCallContext
from sqlalchemy import text

from a2a_x402.merchant.edge._tenancy import tenant_owner
from a2a_x402.storage import create_engine
from tests.fixtures.merchant import A2ACallError

from .conftest import TENANT_A, TENANT_B, a2a_http_as, issue_key
from .wire import (
    INVALID_PARAMS,
    JSON,
    NOT_FOUND,
    Wire,
    assert_failure,
    binding,
    mid,
    start_quote,
    user_message,
)


async def stored_rows(database_url: str) -> list[tuple[str, str]]:
    """(id, owner) of every row in the task table."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            result = await connection.execute(text("SELECT id, owner FROM tasks ORDER BY id"))
            return [(row.id, row.owner) for row in result]
    finally:
        await engine.dispose()


async def assert_task_not_found(wire: Wire, task: JSON) -> None:
    """Every operation on `task` through `wire` fails as if the task did not exist."""
    for operation in (wire.get_task, wire.cancel):
        with pytest.raises(A2ACallError) as failure:
            await operation(task["id"])
        assert_failure(failure, wire, "TASK_NOT_FOUND", NOT_FOUND)
    with pytest.raises(A2ACallError) as failure:
        async with wire.subscribe(task["id"]):
            pass
    assert_failure(failure, wire, "TASK_NOT_FOUND", NOT_FOUND)


async def test_other_tenants_cannot_reach_a_task(binding_name: str, http: httpx.AsyncClient) -> None:
    owner = binding(binding_name, http, TENANT_A)
    task = await start_quote(owner)

    for other in (TENANT_B, ""):
        intruder = binding(binding_name, http, other)
        await assert_task_not_found(intruder, task)
        for context_id in ("", task["contextId"]):
            follow_up = user_message("S", message_id=mid(), task_id=task["id"], context_id=context_id)
            with pytest.raises(A2ACallError) as failure:
                await intruder.send(follow_up)
            assert_failure(failure, intruder, "TASK_NOT_FOUND", NOT_FOUND)
        assert (await intruder.list_tasks())["tasks"] == []
        assert (await intruder.list_tasks(contextId=task["contextId"]))["tasks"] == []

    assert await owner.get_task(task["id"]) == task
    done = await owner.send(user_message("S", message_id=mid(), task_id=task["id"]))
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_shared_context_id_does_not_share_tasks(
    binding_name: str, merchant_url: str, database_url: str
) -> None:
    # Authenticated callers choose their context ids (anonymous ones may not: test_callers).
    async with (
        a2a_http_as(merchant_url, await issue_key(database_url, TENANT_A, "alice")) as alice_http,
        a2a_http_as(merchant_url, await issue_key(database_url, TENANT_B, "bob")) as bob_http,
    ):
        alice, bob = binding(binding_name, alice_http, TENANT_A), binding(binding_name, bob_http, TENANT_B)
        await _share_a_context_id(alice, bob)


async def _share_a_context_id(alice: Wire, bob: Wire) -> None:
    mine = await start_quote(alice)

    theirs = (await bob.send(user_message("hello", message_id=mid(), context_id=mine["contextId"])))["task"]

    assert theirs["id"] != mine["id"]
    assert [task["id"] for task in (await alice.list_tasks(contextId=mine["contextId"]))["tasks"]] == [
        mine["id"]
    ]
    assert [task["id"] for task in (await bob.list_tasks(contextId=mine["contextId"]))["tasks"]] == [
        theirs["id"]
    ]
    assert await alice.get_task(mine["id"]) == mine


async def test_unknown_tenant_is_refused_and_changes_nothing(
    binding_name: str, http: httpx.AsyncClient, database_url: str
) -> None:
    task = await start_quote(binding(binding_name, http, TENANT_A))
    rows_before = await stored_rows(database_url)
    ghost = binding(binding_name, http, "ghost")

    for message in (
        user_message("hello", message_id=mid()),
        user_message("S", message_id=mid(), task_id=task["id"], context_id=task["contextId"]),
    ):
        with pytest.raises(A2ACallError) as failure:
            await ghost.send(message)
        assert_failure(failure, ghost, "INVALID_PARAMS", INVALID_PARAMS)
        assert "ghost" in failure.value.message
        with pytest.raises(A2ACallError) as failure:
            await ghost.stream(message)
        assert_failure(failure, ghost, "INVALID_PARAMS", INVALID_PARAMS)
    with pytest.raises(A2ACallError) as failure:
        await ghost.list_tasks()
    assert_failure(failure, ghost, "INVALID_PARAMS", INVALID_PARAMS)
    await assert_task_not_found(ghost, task)

    assert await stored_rows(database_url) == rows_before == [(task["id"], f"{TENANT_A}/")]
    assert await binding(binding_name, http, TENANT_A).get_task(task["id"]) == task


class NamedUser(User):
    """An authenticated user, as an auth middleware would provide."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def test_owner_key_combines_tenant_and_user() -> None:
    assert tenant_owner(ServerCallContext(tenant="", user=UnauthenticatedUser())) == "/"
    assert tenant_owner(ServerCallContext(tenant=TENANT_A, user=UnauthenticatedUser())) == f"{TENANT_A}/"
    assert tenant_owner(ServerCallContext(tenant=TENANT_A, user=NamedUser("bob"))) == f"{TENANT_A}/bob"
    assert tenant_owner(ServerCallContext(tenant=TENANT_B, user=NamedUser("bob"))) == f"{TENANT_B}/bob"


def test_owner_key_of_a_very_long_user_name_fits_its_column() -> None:
    names = ["u" * 300 + suffix for suffix in ("a", "b")]

    owners = [tenant_owner(ServerCallContext(tenant=TENANT_A, user=NamedUser(name))) for name in names]

    assert all(len(owner) <= 255 and owner.startswith(f"{TENANT_A}/sha256:") for owner in owners)
    assert owners[0] != owners[1]
