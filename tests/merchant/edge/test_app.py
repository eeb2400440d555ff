"""The edge app over real HTTP, raw ProtoJSON on both bindings, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from a2a_x402.merchant.edge import HEALTH_PATH, JSONRPC_PATH, REST_PATH
from tests.fixtures.deadlines import within_deadline
from tests.fixtures.merchant import A2ACallError
from tests.fixtures.servers import SHUTDOWN_GRACE_S

from .conftest import TENANT_A, a2a_http, running_merchant
from .executors import QUESTION, STREAM_STEPS
from .wire import (
    INVALID_PARAMS,
    JSON,
    NOT_CANCELABLE,
    NOT_FOUND,
    UNSUPPORTED,
    Rest,
    Wire,
    assert_failure,
    assert_protojson_1_0,
    binding,
    mid,
    start_quote,
    user_message,
)


async def test_input_required_then_follow_up_completes(wire: Wire) -> None:
    task = await start_quote(wire)

    assert_protojson_1_0(task)
    assert len(task["id"]) == 36 and len(task["contextId"]) == 36
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    question = task["status"]["message"]
    assert question["role"] == "ROLE_AGENT"
    assert question["parts"] == [{"text": QUESTION}]
    assert (question["taskId"], question["contextId"]) == (task["id"], task["contextId"])
    assert [(m["role"], m["parts"]) for m in task["history"]] == [("ROLE_USER", [{"text": "quote"}])]

    follow_up = user_message("M", message_id=mid(), task_id=task["id"], context_id=task["contextId"])
    done = (await wire.send(follow_up))["task"]

    assert_protojson_1_0(done)
    assert (done["id"], done["contextId"]) == (task["id"], task["contextId"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["status"]["timestamp"].endswith("Z")
    assert [artifact["name"] for artifact in done["artifacts"]] == ["order"]
    assert done["artifacts"][0]["parts"] == [{"text": "order: M"}]
    assert [m["role"] for m in done["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]


async def test_follow_up_naming_only_the_task_stays_in_its_context(wire: Wire) -> None:
    task = await start_quote(wire)

    done = (await wire.send(user_message("L", message_id=mid(), task_id=task["id"])))["task"]

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert {message["contextId"] for message in done["history"]} == {task["contextId"]}


async def test_context_id_not_matching_the_task_is_rejected(wire: Wire) -> None:
    task = await start_quote(wire)
    other_context = str(uuid.uuid4())

    with pytest.raises(A2ACallError) as failure:
        await wire.send(user_message("M", message_id=mid(), task_id=task["id"], context_id=other_context))

    assert_failure(failure, wire, "INVALID_PARAMS", INVALID_PARAMS)
    assert await wire.get_task(task["id"]) == task


async def test_overlong_context_ids_are_rejected(wire: Wire) -> None:
    # A new task would store the context id, and no stored id is longer than 36 characters.
    for message in (
        user_message("hello", message_id=mid(), context_id="x" * 37),
        user_message("hello", message_id=mid(), context_id="x" * 37, task_id=str(uuid.uuid4())),
    ):
        with pytest.raises(A2ACallError) as failure:
            await wire.send(message)
        assert_failure(failure, wire, "INVALID_PARAMS", INVALID_PARAMS)
    assert (await wire.list_tasks())["tasks"] == []


async def test_new_task_of_an_authenticated_caller_may_join_a_context_it_chose(keyed_wire: Wire) -> None:
    context_id = str(uuid.uuid4())

    task = (await keyed_wire.send(user_message("hello", message_id=mid(), context_id=context_id)))["task"]

    assert task["contextId"] == context_id
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_streaming_sends_the_task_then_updates(wire: Wire) -> None:
    events = await wire.stream(user_message("stream", message_id=mid()))

    assert_protojson_1_0(events)
    assert [list(event) for event in events] == [
        ["task"],
        *[["statusUpdate"]] * STREAM_STEPS,
        ["artifactUpdate"],
        ["statusUpdate"],
    ]
    task = events[0]["task"]
    for event in events[1:]:
        update = next(iter(event.values()))
        assert (update["taskId"], update["contextId"]) == (task["id"], task["contextId"])
    states = [event["statusUpdate"]["status"]["state"] for event in events if "statusUpdate" in event]
    assert states == ["TASK_STATE_WORKING"] * STREAM_STEPS + ["TASK_STATE_COMPLETED"]
    assert events[1]["statusUpdate"]["status"]["message"]["role"] == "ROLE_AGENT"
    assert events[-2]["artifactUpdate"]["artifact"]["parts"] == [{"text": "streamed"}]
    stored = await wire.get_task(task["id"])
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_get_task_honours_history_length(wire: Wire) -> None:
    task = await start_quote(wire)

    assert await wire.get_task(task["id"]) == task
    assert "history" not in await wire.get_task(task["id"], history_length=0)
    latest = await wire.get_task(task["id"], history_length=1)
    assert [message["parts"] for message in latest["history"]] == [[{"text": "quote"}]]


async def test_list_tasks_filters_and_pages(keyed_wire: Wire) -> None:
    wire = keyed_wire
    first = (await wire.send(user_message("hello", message_id=mid())))["task"]
    second = await start_quote(wire)

    listed = await wire.list_tasks()
    assert {task["id"] for task in listed["tasks"]} == {first["id"], second["id"]}
    assert (listed["totalSize"], listed["pageSize"], listed["nextPageToken"]) == (2, 50, "")
    assert all("artifacts" not in task for task in listed["tasks"])

    waiting = await wire.list_tasks(status="TASK_STATE_INPUT_REQUIRED")
    assert [task["id"] for task in waiting["tasks"]] == [second["id"]]
    in_context = await wire.list_tasks(contextId=first["contextId"], includeArtifacts=True)
    assert [task["id"] for task in in_context["tasks"]] == [first["id"]]
    assert in_context["tasks"][0]["artifacts"] == first["artifacts"]

    page = await wire.list_tasks(pageSize=1)
    assert len(page["tasks"]) == 1 and page["nextPageToken"]
    rest = await wire.list_tasks(pageSize=1, pageToken=page["nextPageToken"])
    assert {page["tasks"][0]["id"], rest["tasks"][0]["id"]} == {first["id"], second["id"]}
    assert rest["nextPageToken"] == ""


async def test_cancel_is_final(wire: Wire) -> None:
    task = await start_quote(wire)

    canceled = await wire.cancel(task["id"])

    assert canceled["id"] == task["id"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert (await wire.get_task(task["id"]))["status"]["state"] == "TASK_STATE_CANCELED"
    with pytest.raises(A2ACallError) as failure:
        await wire.cancel(task["id"])
    assert_failure(failure, wire, "TASK_NOT_CANCELABLE", NOT_CANCELABLE)
    with pytest.raises(A2ACallError) as failure:
        await wire.send(user_message("M", message_id=mid(), task_id=task["id"]))
    assert_failure(failure, wire, "UNSUPPORTED_OPERATION", UNSUPPORTED)


async def test_cancel_a_working_task(wire: Wire) -> None:
    started = await wire.send(
        user_message("slow", message_id=mid()), configuration={"returnImmediately": True}
    )
    task_id = started["task"]["id"]

    canceled = await wire.cancel(task_id)

    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"


async def test_subscribe_streams_the_task_until_it_ends(wire: Wire) -> None:
    task = await start_quote(wire)

    async with wire.subscribe(task["id"]) as events:
        first = await anext(events)
        await wire.send(user_message("S", message_id=mid(), task_id=task["id"]))
        later = [event async for event in events]

    assert list(first) == ["task"]
    assert first["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert_protojson_1_0(later)
    assert [list(event) for event in later][-2:] == [["artifactUpdate"], ["statusUpdate"]]
    assert later[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_rest_subscribe_also_accepts_get(http: httpx.AsyncClient) -> None:
    rest = Rest(http, subscribe_method="GET")
    task = await start_quote(rest)

    async with rest.subscribe(task["id"]) as events:
        first = await anext(events)

    assert first["task"]["id"] == task["id"]


async def test_subscribe_to_a_finished_task_is_unsupported(wire: Wire) -> None:
    task = (await wire.send(user_message("hello", message_id=mid())))["task"]

    with pytest.raises(A2ACallError) as failure:
        async with wire.subscribe(task["id"]):
            pass

    assert_failure(failure, wire, "UNSUPPORTED_OPERATION", UNSUPPORTED)


# A UUID, an id just over the 36 characters of any stored one (as the TCK sends), and a far longer one.
# Ids name the cases: a value made at collection would differ between pytest-xdist workers.
@pytest.mark.parametrize(
    "unknown",
    [str(uuid.uuid4()), "tck-nonexistent-" + "7" * 26, "x" * 300],
    ids=["uuid", "just-over-36", "300-characters"],
)
async def test_unknown_task_id_is_not_found(wire: Wire, unknown: str) -> None:
    for operation in (wire.get_task, wire.cancel):
        with pytest.raises(A2ACallError) as failure:
            await operation(unknown)
        assert_failure(failure, wire, "TASK_NOT_FOUND", NOT_FOUND)
    with pytest.raises(A2ACallError) as failure:
        async with wire.subscribe(unknown):
            pass
    assert_failure(failure, wire, "TASK_NOT_FOUND", NOT_FOUND)
    with pytest.raises(A2ACallError) as failure:
        await wire.send(user_message("M", message_id=mid(), task_id=unknown))
    assert_failure(failure, wire, "TASK_NOT_FOUND", NOT_FOUND)
    with pytest.raises(A2ACallError) as failure:
        await wire.stream(user_message("M", message_id=mid(), task_id=unknown))
    assert_failure(failure, wire, "TASK_NOT_FOUND", NOT_FOUND)
    assert (await wire.list_tasks())["tasks"] == []


async def test_both_bindings_share_one_task_space(http: httpx.AsyncClient) -> None:
    task = await start_quote(binding("rest", http, TENANT_A))

    seen = await binding("jsonrpc", http, TENANT_A).get_task(task["id"])

    assert seen == task


@pytest.mark.parametrize("version_header", [{}, {"A2A-Version": "0.3"}])
async def test_requests_not_speaking_1_0_are_refused(
    sqlite_http: httpx.AsyncClient, version_header: dict[str, str]
) -> None:
    headers = {"A2A-Version": "", **version_header}
    rest = await sqlite_http.get(f"{REST_PATH}/tasks", headers=headers)
    rpc = await sqlite_http.post(
        JSONRPC_PATH, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    )

    assert rest.status_code == 400
    assert rest.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert rpc.json()["error"]["code"] == -32009


async def test_version_may_travel_as_query_parameter(sqlite_http: httpx.AsyncClient) -> None:
    response = await sqlite_http.get(
        f"{REST_PATH}/tasks", headers={"A2A-Version": ""}, params={"A2A-Version": "1.0"}
    )

    assert response.status_code == 200
    assert response.json()["tasks"] == []


async def test_healthz(sqlite_http: httpx.AsyncClient) -> None:
    response = await sqlite_http.get(HEALTH_PATH)

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_tasks_survive_a_restart(database_url: str, binding_name: str) -> None:
    async def send(base_url: str, message: JSON) -> JSON:
        async with a2a_http(base_url) as http:
            task: JSON = (await binding(binding_name, http, TENANT_A).send(message))["task"]
            return task

    with running_merchant(database_url) as base_url:
        task = await send(base_url, user_message("quote", message_id=mid()))

    with running_merchant(database_url) as base_url:
        async with a2a_http(base_url) as http:
            assert await binding(binding_name, http, TENANT_A).get_task(task["id"]) == task
        done = await send(base_url, user_message("XL", message_id=mid(), task_id=task["id"]))

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"] == [{"text": "order: XL"}]


async def test_extra_routes_are_served_next_to_the_tenant_routes(sqlite_url: str) -> None:
    async def ledger(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"ledger of {request.path_params['tenant']}")

    extra = [Route("/tenants/{tenant}/ledger/balance", ledger)]
    with running_merchant(sqlite_url, routes=extra) as base_url:
        async with a2a_http(base_url) as http:
            response = await http.get(f"/tenants/{TENANT_A}/ledger/balance")
            listed = await binding("rest", http, TENANT_A).list_tasks()

    assert response.text == f"ledger of {TENANT_A}"
    assert listed["tasks"] == []


@pytest.mark.error_logs(
    "why: the app starts on an unmigrated database: its startup fails, logged for the operator"
)
async def test_app_refuses_to_start_on_an_unmigrated_database(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"

    with pytest.raises(RuntimeError, match="exited during startup"), running_merchant(url):
        pass

    # The missing file is the outdated schema's own case (`MissingDatabaseError` is a `SchemaOutdatedError`).
    assert "MissingDatabaseError: there is no database at " in caplog.text
    assert not (tmp_path / "empty.db").exists()


async def test_shutdown_drains_running_tasks_promptly(sqlite_url: str) -> None:
    with running_merchant(sqlite_url) as base_url:
        async with a2a_http(base_url) as http:
            wire = binding("rest", http)
            started = await wire.send(
                user_message("slow", message_id=mid()), configuration={"returnImmediately": True}
            )
        stopping = time.monotonic()

    # A task left waiting would hold the server's stop until `serve_asgi` gave up on it (and raised); a stop
    # that waited it out some other way would never end (the task waits until canceled). It normally takes
    # a fraction of one grace: only such a failure reaches the bound, however busy the machine.
    assert time.monotonic() - stopping < within_deadline(SHUTDOWN_GRACE_S)
    with running_merchant(sqlite_url) as base_url:
        async with a2a_http(base_url) as http:
            stored = await binding("rest", http).get_task(started["task"]["id"])
    # Pinned on purpose: the SDK records nothing when shutdown interrupts a task, so it stays WORKING.
    # Should that change (e.g. to FAILED), this test must be revisited, not the assertion loosened.
    assert stored["status"]["state"] == "TASK_STATE_WORKING"


async def test_an_idle_interrupted_task_resumes_after_release(sqlite_url: str, binding_name: str) -> None:
    with running_merchant(sqlite_url, interrupted_task_timeout_s=0.05) as base_url:
        async with a2a_http(base_url) as http:
            wire = binding(binding_name, http, TENANT_A)
            task = await start_quote(wire)
            await asyncio.sleep(0.3)
            async with wire.subscribe(task["id"]) as events:
                first = await anext(events)
            done = (await wire.send(user_message("S", message_id=mid(), task_id=task["id"])))["task"]

    assert first["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_paths_with_a_trailing_slash_are_served_as_without(sqlite_http: httpx.AsyncClient) -> None:
    # httpx joins an empty path to the interface URL as `…/a2a/jsonrpc/`: no redirect may drop the body.
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
    request["params"] = {"message": user_message("hello", message_id=mid())}
    sent = await sqlite_http.post(JSONRPC_PATH + "/", json=request)
    assert sent.status_code == 200, sent.headers
    task = sent.json()["result"]["task"]

    rest_sent = await sqlite_http.post(
        REST_PATH + "/message:send/", json={"message": user_message("hello", message_id=mid())}
    )
    fetched = await sqlite_http.get(f"{REST_PATH}/tasks/{task['id']}//")
    listed = await sqlite_http.get(REST_PATH + "/tasks/", params={"contextId": task["contextId"]})
    tenant_listed = await sqlite_http.get(f"{REST_PATH}/{TENANT_A}/tasks/")
    streamed = await sqlite_http.post(
        JSONRPC_PATH + "/",
        json={**request, "method": "SendStreamingMessage"},
        headers={"Accept": "text/event-stream"},
    )

    for answer in (rest_sent, fetched, listed, tenant_listed, streamed):
        assert answer.status_code == 200, (answer.request.url, answer.status_code, answer.headers)
    assert rest_sent.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert fetched.json() == task
    assert [t["id"] for t in listed.json()["tasks"]] == [task["id"]] and tenant_listed.json()["tasks"] == []
    assert streamed.headers["content-type"].startswith("text/event-stream")
    # Only A2A paths: the prefix itself and other routes keep their own answers.
    assert (await sqlite_http.get("/a2a/")).status_code == 404
    assert (await sqlite_http.get(HEALTH_PATH + "/")).status_code != 200


async def test_a_path_that_only_routes_with_a_trailing_slash_is_never_redirected(
    sqlite_http: httpx.AsyncClient,
) -> None:
    # Found by schemathesis: a tenant segment with a `#` left `/a2a/rest/<tenant>`, which only the tenant
    # Mount's slashed form routes; the redirect's slash was trimmed again, round and round. Never redirected.
    path = f"{REST_PATH}/%5B'k%C2%AE%C3%A2"  # what is left before the `#` the generated tenant held
    answer = await sqlite_http.get(path)

    assert answer.status_code < 300 or answer.status_code >= 400, answer.headers
    assert "location" not in answer.headers
