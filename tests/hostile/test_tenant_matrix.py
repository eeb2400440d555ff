"""Tenant isolation, cell by cell: every tenant tries every operation on another tenant's tasks and books.

One reference merchant (SQLite, the dev chain) serves the default tenant, `acme` and `globex`, each with a
billing token; `acme` has a webhook endpoint (a real receiver on 127.0.0.1). `acme` owns a task waiting for
payment and a paid one, the default tenant a task waiting for payment, `globex` one of its own. Then:

* A2A, on JSON-RPC, HTTP+JSON and gRPC: each other tenant, and an unknown one, gets, cancels, subscribes to,
  sends a message to, streams a message to, and pays (with a valid signed authorization for the victim's
  terms) each victim task, and lists tasks (all, and by the victim's context). Every attempt is refused
  as if the task did not exist (TaskNotFound; an unknown tenant's sends and lists: InvalidParams) and a
  list never shows a victim task. The four push-notification-config operations (create, get, list,
  delete) on each victim task are refused exactly as they are for a task that does not exist (today the
  merchant supports no push notifications: PushNotificationNotSupported for a served tenant,
  TaskNotFound for an unknown one; were support added, the same cells would hold it to TaskNotFound).
* Billing: `acme`'s balance, statement (JSON and CSV), webhook events and a redelivery, with no token, a
  wrong token, another tenant's token, `acme`'s token in the wrong scheme or altered; `acme`'s token on an
  unknown tenant; `globex`, authenticated, redelivering `acme`'s event and reading its own books. All are
  refused (401; 404 for the foreign event) or show nothing of `acme`.
* After every cell nothing has changed: every row of every table, the relayer nonce, the payees' balances,
  the webhook receiver's count. `acme`'s own calls succeed (the controls), so the refusals are not a
  broken setup.

The merchant is started once for the module; the chain is rolled back at its end.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.app import build_app
from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.webhooks import generate_secret
from a2a_x402.payer import sign_payment
from a2a_x402.storage import upgrade_schema
from tests.fixtures.a2a_grpc import GrpcCalls
from tests.fixtures.chain import rolled_back
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    A2ACallError,
    MerchantWire,
    chain_settings,
    offered_terms,
    payment_message,
    user_message,
)
from tests.fixtures.servers import base_url_of, bind_loopback, free_port, serve_asgi

from .cells import cells, first_event, refusal, refused_as_nowhere, unchanged_state
from .merchants import A2A_HEADERS, PAYEES, TOKENS, pay, quote, tenants_toml
from .state import wait_until_quiet

if TYPE_CHECKING:
    from _pytest.mark import ParameterSet

JSON = dict[str, Any]

GHOST = "ghost"
_NO_RECONCILE_S = 3600.0


@dataclass
class Receiver:
    """A webhook endpoint that accepts everything and counts what it got."""

    received: list[bytes] = field(default_factory=list)

    async def hook(self, request: Request) -> Response:
        """Accept one delivery."""
        self.received.append(await request.body())
        return Response(status_code=204)


@dataclass(frozen=True)
class World:
    """The merchant, its database, the victims' tasks and what the cells need to attack them."""

    base_url: str
    database_url: str
    chain: DevChain
    receiver: Receiver
    tasks: dict[str, JSON]
    owners: dict[str, str]
    acme_event_ids: tuple[str, ...]
    payer_key: str
    secrets: tuple[str, ...]

    def http(self) -> httpx.AsyncClient:
        """An A2A 1.0 client with the x402 extension activated."""
        return httpx.AsyncClient(base_url=self.base_url, headers=A2A_HEADERS, timeout=HANG_S)


def _wait_delivered(database_url: str, chain: DevChain, receiver: Receiver, expected: int) -> None:
    deadline = time.monotonic() + HANG_S
    while len(receiver.received) < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the receiver got {len(receiver.received)} of {expected} deliveries")
        time.sleep(0.05)
    wait_until_quiet(database_url, chain, PAYEES.values())


@pytest.fixture(scope="module")
async def world(devchain: DevChain, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    """The merchant with the victims' tasks in place and every webhook delivered."""
    directory = tmp_path_factory.mktemp("tenant-matrix")
    database_url = f"sqlite+aiosqlite:///{directory / 'merchant.db'}"
    await upgrade_schema(database_url)
    receiver = Receiver()
    with rolled_back(devchain.rpc), ExitStack() as servers:
        # See tests.fixtures.merchant.start_merchant: payers sign with the wall clock.
        devchain.rpc.call("evm_setTime", [int(time.time())])
        hook_url = servers.enter_context(
            serve_asgi(Starlette(routes=[Route("/hook", receiver.hook, methods=["POST"])]))
        )
        world = _build_world(devchain, database_url, directory, receiver, hook_url, servers)
        yield world


def _build_world(
    chain: DevChain, database_url: str, directory: Path, receiver: Receiver, hook_url: str, servers: ExitStack
) -> World:
    webhooks = {"acme": (f"{hook_url}/hook", generate_secret())}
    sock = bind_loopback()
    values: dict[str, Any] = {
        "database_url": database_url,
        **chain_settings(chain),
        "public_url": base_url_of(sock),
        "grpc_port": free_port(),
        "tenants_file": str(tenants_toml(directory / "tenants.toml", webhooks=webhooks)),
        "webhooks_allow_private": True,
        # The reconciler would finalize the settlement (an entry, an event, a delivery) during some cell.
        "reconcile_interval_s": _NO_RECONCILE_S,
        "_env_file": None,
    }
    settings = MerchantSettings(**values)
    base_url = servers.enter_context(serve_asgi(build_app(settings), sock=sock))
    with httpx.Client(base_url=base_url, headers=A2A_HEADERS, timeout=HANG_S) as client:
        tasks = {
            "acme-awaiting": quote(client, "acme"),
            "acme-paid": pay(client, "acme", quote(client, "acme"), chain.new_payer()),
            "default-awaiting": quote(client, ""),
            "globex-own": quote(client, "globex"),
        }
        events = client.get("/tenants/acme/webhooks/events", headers=_bearer(TOKENS["acme"])).json()["events"]
    _wait_delivered(database_url, chain, receiver, len(events))
    paid = tasks["acme-paid"]
    return World(
        base_url=base_url,
        database_url=database_url,
        chain=chain,
        receiver=receiver,
        tasks=tasks,
        owners={"acme-awaiting": "acme", "acme-paid": "acme", "default-awaiting": "", "globex-own": "globex"},
        acme_event_ids=tuple(event["id"] for event in events),
        payer_key=chain.new_payer(),
        # What a read by another tenant must never contain.
        secrets=(
            paid["id"],
            paid["contextId"],
            tasks["acme-awaiting"]["id"],
            *_transactions(paid["status"]["message"]["metadata"]),
        ),
    )


def _transactions(metadata: Any) -> list[str]:
    found: list[str] = []
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            if key == "transaction" and isinstance(value, str) and value:
                found.append(value)
            else:
                found += _transactions(value)
    elif isinstance(metadata, list):
        for item in metadata:
            found += _transactions(item)
    return found


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def unchanged(world: World) -> Iterator[None]:
    """Fails the test if anything changed while it ran (checked once the merchant is quiet)."""
    deliveries = len(world.receiver.received)
    with unchanged_state(world.database_url, world.chain, PAYEES.values()):
        yield
    new = len(world.receiver.received) - deliveries
    assert not new, f"the receiver got {new} new deliveries"


# -- A2A --------------------------------------------------------------------------------------------------

VICTIMS = ("acme-awaiting", "acme-paid", "default-awaiting")
TENANT_NAMES = {"": "default", "acme": "acme", "globex": "globex", GHOST: GHOST}
TASK_OPERATIONS = ("GetTask", "CancelTask", "SubscribeToTask", "SendMessage", "SendStreamingMessage", "Pay")
BINDINGS = ("jsonrpc", "rest", "grpc")
# How each binding codes the two refusals: (HTTP status, JSON-RPC code), or (gRPC status, None).
CODED: dict[str, dict[str, tuple[int | str, int | None]]] = {
    "TASK_NOT_FOUND": {"jsonrpc": (200, -32001), "rest": (404, None), "grpc": ("NOT_FOUND", None)},
    "INVALID_PARAMS": {"jsonrpc": (200, -32602), "rest": (400, None), "grpc": ("INVALID_ARGUMENT", None)},
}


def _intruders(victim: str) -> list[str]:
    owner = "" if victim.startswith("default") else victim.split("-")[0]
    return [tenant for tenant in ("", "acme", "globex", GHOST) if tenant != owner]


def _cells(operations: tuple[str, ...]) -> list[ParameterSet]:
    """(victim, intruder, operation, binding): every other tenant tries every operation on every victim."""
    return cells(VICTIMS, _intruders, dict.fromkeys(BINDINGS, operations), TENANT_NAMES)


TASK_CELLS = _cells(TASK_OPERATIONS)


def _pay(world: World, wire: MerchantWire, task_id: str) -> Awaitable[JSON]:
    terms = offered_terms(world.tasks["acme-awaiting"]).accepts[0]
    return wire.send(payment_message(task_id, sign_payment(world.payer_key, terms)))


def _attempt(world: World, wire: MerchantWire, operation: str, task: JSON) -> Awaitable[object]:
    task_id = task["id"]
    attempts: dict[str, Callable[[], Awaitable[object]]] = {
        "GetTask": lambda: wire.get_task(task_id),
        "CancelTask": lambda: wire.cancel(task_id),
        "SubscribeToTask": lambda: first_event(wire.subscribe(task_id)),
        "SendMessage": lambda: wire.send(user_message(task_id=task_id, context_id=task["contextId"])),
        "SendStreamingMessage": lambda: wire.stream(user_message(task_id=task_id)),
        "Pay": lambda: _pay(world, wire, task_id),
    }
    return attempts[operation]()


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(("victim", "intruder", "operation", "binding"), TASK_CELLS)
async def test_another_tenant_cannot_touch_a_task(
    world: World, victim: str, intruder: str, operation: str, binding: str
) -> None:
    async with world.http() as http:
        error = await refusal(
            _attempt(world, MerchantWire(http, binding, intruder), operation, world.tasks[victim])
        )
    unknown_tenant_send = intruder == GHOST and operation in ("SendMessage", "SendStreamingMessage", "Pay")
    expected = "INVALID_PARAMS" if unknown_tenant_send else "TASK_NOT_FOUND"
    assert error.reason == expected, error
    assert error.coded == CODED[expected][binding]


LIST_CELLS = [
    pytest.param(intruder, by_context, binding, id=f"{TENANT_NAMES[intruder]}-ListTasks-{scope}-{binding}")
    for intruder in ("", "globex", GHOST)
    for by_context, scope in (
        (None, "all"),
        ("acme-paid", "acme-context"),
        ("default-awaiting", "default-context"),
    )
    for binding in BINDINGS
]


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(("intruder", "by_context", "binding"), LIST_CELLS)
async def test_another_tenant_lists_none_of_the_victims_tasks(
    world: World, intruder: str, by_context: str | None, binding: str
) -> None:
    context_id = world.tasks[by_context]["contextId"] if by_context else None
    async with world.http() as http:
        if intruder == GHOST:
            refused = await refusal(_list(http, binding, intruder, context_id))
            assert refused.reason == "INVALID_PARAMS"
            return
        listed = {task["id"] for task in (await _list(http, binding, intruder, context_id))["tasks"]}
    own = {name for name, owner in world.owners.items() if owner == intruder}
    # Anonymous callers list only within a context they name: without one, nothing (issue 24).
    visible = {world.tasks[name]["id"] for name in own if world.tasks[name]["contextId"] == context_id}
    assert listed == visible


async def _list(http: httpx.AsyncClient, binding: str, tenant: str, context_id: str | None) -> JSON:
    """ListTasks (filtered by context when given); `MerchantWire.list_tasks` takes no filter."""
    query: JSON = {} if context_id is None else {"contextId": context_id}
    if binding == "grpc":
        return await GrpcCalls(http, tenant).call("ListTasks", query)
    if binding == "rest":
        response = await http.get(
            f"{REST_PATH}/{tenant}/tasks" if tenant else f"{REST_PATH}/tasks", params=query
        )
        body: JSON = response.json()
        if response.status_code != 200:
            error = body["error"]
            raise A2ACallError(response.status_code, None, error["details"][0]["reason"], error["message"])
        return body
    params = {"tenant": tenant, **query} if tenant else query
    request = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params}
    body = (await http.post(JSONRPC_PATH, json=request)).json()
    if "error" in body:
        error = body["error"]
        raise A2ACallError(200, error["code"], error["data"][0]["reason"], error["message"])
    result: JSON = body["result"]
    return result


PUSH_OPERATIONS = (
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
)
PUSH_CELLS = _cells(PUSH_OPERATIONS)
_PUSH_CONFIG_ID = "intruder-config"


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(("victim", "intruder", "operation", "binding"), PUSH_CELLS)
async def test_another_tenant_cannot_touch_a_tasks_push_notification_configs(
    world: World, victim: str, intruder: str, operation: str, binding: str
) -> None:
    async with world.http() as http:
        error = await refused_as_nowhere(
            lambda task_id: _push_call(http, binding, intruder, operation, task_id), world.tasks[victim]["id"]
        )
    assert error.reason in ("TASK_NOT_FOUND", "PUSH_NOTIFICATION_NOT_SUPPORTED", "INVALID_PARAMS"), error
    assert not any(secret in str(error) for secret in world.secrets if secret != world.tasks[victim]["id"])


async def _push_call(
    http: httpx.AsyncClient, binding: str, tenant: str, operation: str, task_id: str
) -> JSON:
    """One push-notification-config operation on `task_id` as `tenant`; A2ACallError when refused."""
    config = {"url": "https://intruder.example/hook", "token": "intruder-token"}
    params: JSON = {"taskId": task_id}
    if operation == "CreateTaskPushNotificationConfig":
        params.update(config)
    elif operation != "ListTaskPushNotificationConfigs":
        params["id"] = _PUSH_CONFIG_ID
    if binding == "grpc":
        return await GrpcCalls(http, tenant).call(operation, params)
    if binding == "jsonrpc":
        if tenant:
            params["tenant"] = tenant
        request = {"jsonrpc": "2.0", "id": 1, "method": operation, "params": params}
        body: JSON = (await http.post(JSONRPC_PATH, json=request)).json()
        if "error" in body:
            error = body["error"]
            infos = error.get("data") or [{}]
            raise A2ACallError(200, error["code"], infos[0].get("reason", ""), error["message"])
        result: JSON = body["result"] or {}
        return result
    root = f"{REST_PATH}/{tenant}/tasks/{task_id}" if tenant else f"{REST_PATH}/tasks/{task_id}"
    method, path, payload = {
        "CreateTaskPushNotificationConfig": ("POST", "/pushNotificationConfigs", config),
        "GetTaskPushNotificationConfig": ("GET", f"/pushNotificationConfigs/{_PUSH_CONFIG_ID}", None),
        "ListTaskPushNotificationConfigs": ("GET", "/pushNotificationConfigs", None),
        "DeleteTaskPushNotificationConfig": ("DELETE", f"/pushNotificationConfigs/{_PUSH_CONFIG_ID}", None),
    }[operation]
    response = await http.request(method, root + path, json=payload)
    answer: JSON = response.json() if response.content else {}
    if response.status_code >= 400:
        error = answer["error"]
        infos = error.get("details") or [{}]
        raise A2ACallError(response.status_code, None, infos[0].get("reason", ""), error["message"])
    return answer


# -- billing ----------------------------------------------------------------------------------------------

BILLING_ROUTES = {
    "balance": ("GET", "/tenants/{tenant}/ledger/balance"),
    "statement-json": ("GET", "/tenants/{tenant}/ledger/statement?format=json"),
    "statement-csv": ("GET", "/tenants/{tenant}/ledger/statement?format=csv"),
    "events": ("GET", "/tenants/{tenant}/webhooks/events?since_sequence=0"),
    "redeliver": ("POST", "/tenants/{tenant}/webhooks/events/{event}/redeliver"),
}
CREDENTIALS: dict[str, dict[str, str]] = {
    "no-token": {},
    "wrong-token": _bearer("wrong-token-0123456789abcdef"),
    "globex-token": _bearer(TOKENS["globex"]),
    "default-token": _bearer(TOKENS[""]),
    "acme-token-as-basic": {"authorization": f"Basic {TOKENS['acme']}"},
    "acme-token-altered": _bearer(TOKENS["acme"][:-1] + "X"),
    "acme-token-prefix": _bearer(TOKENS["acme"][:-1]),
    "bearer-without-token": {"authorization": "Bearer"},
}
_BILLING_CASES = [("acme", credentials, route) for credentials in CREDENTIALS for route in BILLING_ROUTES] + [
    (GHOST, "acme-token", route) for route in BILLING_ROUTES
]
# Each cell calls from its own loopback address: the billing API answers 429 to an address after 10 wrong
# tokens for a tenant, and every cell here must prove the plain 401, not the throttle.
BILLING_CELLS = [
    pytest.param(tenant, credentials, route, f"127.0.1.{n + 1}", id=f"{credentials}-{route}-{tenant}")
    for n, (tenant, credentials, route) in enumerate(_BILLING_CASES)
]


def _billing_url(world: World, route: str, tenant: str) -> tuple[str, str]:
    method, path = BILLING_ROUTES[route]
    return method, path.format(tenant=tenant, event=world.acme_event_ids[0])


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(("tenant", "credentials", "route", "address"), BILLING_CELLS)
async def test_the_books_are_closed_without_the_tenants_token(
    world: World, tenant: str, credentials: str, route: str, address: str
) -> None:
    method, url = _billing_url(world, route, tenant)
    headers = _bearer(TOKENS["acme"]) if credentials == "acme-token" else CREDENTIALS[credentials]
    transport = httpx.AsyncHTTPTransport(local_address=address)
    async with httpx.AsyncClient(base_url=world.base_url, timeout=HANG_S, transport=transport) as http:
        response = await http.request(method, url, headers=headers)

    assert response.status_code == 401, response.text
    assert response.json()["detail"]["code"] == "unauthorized"
    assert not any(secret in response.text for secret in world.secrets)


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(
    "route", list(BILLING_ROUTES), ids=[f"globex-authenticated-{r}" for r in BILLING_ROUTES]
)
async def test_an_authenticated_tenant_sees_and_redelivers_none_of_anothers_books(
    world: World, route: str
) -> None:
    method, url = _billing_url(world, route, "globex")
    async with httpx.AsyncClient(base_url=world.base_url, timeout=HANG_S) as http:
        response = await http.request(method, url, headers=_bearer(TOKENS["globex"]))

    if route == "redeliver":
        # globex names acme's event under its own tenant: the event does not exist for globex.
        assert response.status_code == 404, response.text
        assert response.json()["detail"]["code"] == "event_not_found"
    else:
        assert response.status_code == 200, response.text
    # The refusal may quote the event id globex sent; anything else of acme's is a leak.
    sent = url.split("/")[-2] if route == "redeliver" else None
    leaked = [s for s in (*world.secrets, *world.acme_event_ids) if s != sent and s in response.text]
    assert not leaked, f"globex's {route} shows acme's {leaked}"


# -- controls: the owner's own calls succeed --------------------------------------------------------------


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("binding", BINDINGS)
async def test_control_the_owner_reaches_its_tasks(world: World, binding: str) -> None:
    async with world.http() as http:
        wire = MerchantWire(http, binding, "acme")
        listed = set()
        for name in ("acme-awaiting", "acme-paid"):
            assert (await wire.get_task(world.tasks[name]["id"]))["id"] == world.tasks[name]["id"]
            # Anonymous: a list names the context it lists.
            in_context = await _list(http, binding, "acme", world.tasks[name]["contextId"])
            listed |= {task["id"] for task in in_context["tasks"]}
    assert listed == {world.tasks["acme-awaiting"]["id"], world.tasks["acme-paid"]["id"]}


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("route", [r for r in BILLING_ROUTES if r != "redeliver"], ids=lambda r: f"acme-{r}")
async def test_control_the_owner_reads_its_books(world: World, route: str) -> None:
    method, url = _billing_url(world, route, "acme")
    async with httpx.AsyncClient(base_url=world.base_url, timeout=HANG_S) as http:
        response = await http.request(method, url, headers=_bearer(TOKENS["acme"]))

    assert response.status_code == 200, response.text
    shown = world.acme_event_ids if route == "events" else (world.tasks["acme-paid"]["id"],)
    if route != "balance":
        assert all(item in response.text for item in shown), response.text


async def test_control_the_owner_redelivers_its_event(world: World) -> None:
    """Last in the module: it changes the deliveries (and waits until the receiver has the event again)."""
    before = len(world.receiver.received)
    method, url = _billing_url(world, "redeliver", "acme")
    async with httpx.AsyncClient(base_url=world.base_url, timeout=HANG_S) as http:
        response = await http.request(method, url, headers=_bearer(TOKENS["acme"]))

    assert response.status_code == 202, response.text
    assert response.json() == {"eventId": world.acme_event_ids[0], "deliveries": 1}
    _wait_delivered(world.database_url, world.chain, world.receiver, before + 1)
