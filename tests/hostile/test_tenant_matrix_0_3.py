"""Tenant isolation over A2A 0.3, cell by cell: on 0.3 the URL is the tenant (`/t/{tenant}/...`).

One reference merchant (SQLite, the dev chain) serves `acme` and `globex` from a tenants file without
`[default]`, so the root serves no 0.3 at all. Over 0.3 `acme` owns a task waiting for payment and a paid
one, `globex` one waiting for payment. Then, on 0.3 JSON-RPC and 0.3 HTTP+JSON, from the other tenant's
URLs, an unknown tenant's and the root's: get, cancel, resubscribe, a follow-up message (sent and
streamed), and a payment with a valid signed authorization for the victim's terms (x402 v1 and v2
payloads), on each victim task. Every attempt is refused as if the task did not exist (TaskNotFound; an
unknown tenant's messages: InvalidParams; the root: VersionNotSupported, since it has no 0.3 tenant). The
push-notification-config operations on each victim task are refused exactly as for a task that does not
exist. After every cell nothing has changed: every row of every table, the relayer nonce, the payees'
balances. The controls: `acme` reads its tasks at its own URLs, and the payment the cells presented
elsewhere pays at `acme`'s, credited once to `acme`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import PaymentRequiredV1, requirements_v1_to_v2
from a2a_x402.merchant.app import build_app
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.payer import sign_payment
from a2a_x402.storage import upgrade_schema
from tests.fixtures.chain import rolled_back
from tests.fixtures.merchant import (
    TWO_TENANTS,
    chain_settings,
    ledger_entries,
    write_tenants_file,
)
from tests.fixtures.servers import base_url_of, bind_loopback, serve_asgi
from tests.fixtures.wire_v0_3 import BINDINGS_V0_3, WireV0_3, flat_message, message_v0_3, state_of

from .cells import cells, first_event, refusal, refused_as_nowhere, unchanged_state
from .state import wait_until_quiet

JSON = dict[str, Any]

GHOST = "ghost"
ROOT = ""
PAYEES = {tenant: pay_to for tenant, (pay_to, _) in TWO_TENANTS.items()}
TEXT = "The quick brown fox. The dog sleeps."
_NO_RECONCILE_S = 3600.0


@dataclass(frozen=True)
class World:
    """The merchant, its database, the victims' tasks and the payment the cells present."""

    base_url: str
    database_url: str
    chain: DevChain
    tasks: dict[str, JSON]
    payer_key: str
    payments: dict[str, JSON]

    def http(self) -> httpx.AsyncClient:
        """An HTTP session as a 0.3 client sends it (no `A2A-Version`, extension v0.2 activated)."""
        return WireV0_3.client(self.base_url)


def terms_of(task: JSON) -> PaymentRequiredV1:
    """The x402 v1 terms a 0.3 task waiting for payment offers."""
    return PaymentRequiredV1.from_wire(task["status"]["message"]["metadata"]["x402.payment.required"])


def payloads(key: str, terms: PaymentRequiredV1) -> dict[str, JSON]:
    """One authorization for `terms`, as an x402 v1 payload and as an x402 v2 one."""
    option = terms.accepts[0]
    signed = sign_payment(key, requirements_v1_to_v2(option)).to_json_dict()
    v1 = {"x402Version": 1, "scheme": option.scheme, "network": option.network, "payload": signed["payload"]}
    return {"v1": v1, "v2": signed}


def submitted(task_id: str, payload: JSON) -> JSON:
    """The 0.3 payment submission for `task_id`."""
    return flat_message(
        task_id, {"x402.payment.status": "payment-submitted", "x402.payment.payload": payload}
    )


@pytest.fixture(scope="module")
async def world(devchain: DevChain, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    """The merchant with the victims' tasks in place."""
    directory = tmp_path_factory.mktemp("tenant-matrix-0-3")
    database_url = f"sqlite+aiosqlite:///{directory / 'merchant.db'}"
    await upgrade_schema(database_url)
    with rolled_back(devchain.rpc), ExitStack() as servers:
        # Payers sign with the wall clock (tests.fixtures.merchant.start_merchant).
        devchain.rpc.call("evm_setTime", [int(time.time())])
        base_url = _serve(devchain, database_url, directory, servers)
        async with WireV0_3.client(base_url) as http:
            acme, globex = WireV0_3(http, "jsonrpc", "acme"), WireV0_3(http, "rest", "globex")
            awaiting = await acme.send(message_v0_3(TEXT))
            to_pay = await acme.send(message_v0_3(TEXT))
            key = devchain.new_payer()
            paid = await acme.send(submitted(to_pay["id"], payloads(key, terms_of(to_pay))["v1"]))
            assert state_of(paid) == "completed", paid
            tasks = {
                "acme-awaiting": awaiting,
                "acme-paid": paid,
                "globex-own": await globex.send(message_v0_3(TEXT)),
            }
        wait_until_quiet(database_url, devchain, PAYEES.values())
        payer_key = devchain.new_payer()
        yield World(
            base_url=base_url,
            database_url=database_url,
            chain=devchain,
            tasks=tasks,
            payer_key=payer_key,
            payments=payloads(payer_key, terms_of(awaiting)),
        )


def _serve(chain: DevChain, database_url: str, directory: Path, servers: ExitStack) -> str:
    sock = bind_loopback()
    values: dict[str, Any] = {
        "database_url": database_url,
        **chain_settings(chain),
        "public_url": base_url_of(sock),
        "tenants_file": str(write_tenants_file(directory / "tenants.toml", TWO_TENANTS)),
        # The reconciler would finalize the settlement (an entry, an event) during some cell.
        "reconcile_interval_s": _NO_RECONCILE_S,
        "_env_file": None,
    }
    settings = MerchantSettings(**values)
    base_url: str = servers.enter_context(serve_asgi(build_app(settings), sock=sock))
    return base_url


@pytest.fixture
def unchanged(world: World) -> Iterator[None]:
    """Fails the test if anything changed while it ran (checked once the merchant is quiet)."""
    with unchanged_state(world.database_url, world.chain, PAYEES.values()):
        yield


VICTIMS = ("acme-awaiting", "acme-paid", "globex-own")
TENANT_NAMES = {ROOT: "root", "acme": "acme", "globex": "globex", GHOST: GHOST}
OPERATIONS = ("GetTask", "CancelTask", "Resubscribe", "SendMessage", "SendStreamingMessage", "PayV1", "PayV2")
SENDS = ("SendMessage", "SendStreamingMessage", "PayV1", "PayV2")


def _intruders(victim: str) -> list[str]:
    owner = victim.split("-")[0]
    return [tenant for tenant in ("acme", "globex", GHOST, ROOT) if tenant != owner]


TASK_CELLS = cells(VICTIMS, _intruders, dict.fromkeys(BINDINGS_V0_3, OPERATIONS), TENANT_NAMES)


def _expected(intruder: str, operation: str, transport: str) -> tuple[str, tuple[int, int | None]]:
    """The refusal of `operation` from `intruder`'s URLs: its reason and how the binding codes it."""
    if intruder == ROOT:
        return "VERSION_NOT_SUPPORTED", (200, -32009) if transport == "jsonrpc" else (400, None)
    if intruder == GHOST and operation in SENDS:
        return "INVALID_PARAMS", (200, -32602) if transport == "jsonrpc" else (400, None)
    return "TASK_NOT_FOUND", (200, -32001) if transport == "jsonrpc" else (404, None)


def _attempt(world: World, wire: WireV0_3, operation: str, task: JSON) -> Awaitable[object]:
    task_id = task["id"]
    attempts: dict[str, Callable[[], Awaitable[object]]] = {
        "GetTask": lambda: wire.get_task(task_id),
        "CancelTask": lambda: wire.cancel(task_id),
        "Resubscribe": lambda: first_event(wire.resubscribe(task_id)),
        "SendMessage": lambda: wire.send(message_v0_3("more", task_id=task_id, context_id=task["contextId"])),
        "SendStreamingMessage": lambda: wire.stream(message_v0_3("more", task_id=task_id)),
        "PayV1": lambda: wire.send(submitted(task_id, world.payments["v1"])),
        "PayV2": lambda: wire.send(submitted(task_id, world.payments["v2"])),
    }
    return attempts[operation]()


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(("victim", "intruder", "operation", "transport"), TASK_CELLS)
async def test_another_tenants_0_3_urls_cannot_touch_a_task(
    world: World, victim: str, intruder: str, operation: str, transport: str
) -> None:
    async with world.http() as http:
        wire = WireV0_3(http, transport, intruder)
        error = await refusal(_attempt(world, wire, operation, world.tasks[victim]))

    assert (error.reason, error.coded) == _expected(intruder, operation, transport), error
    for secret in (world.tasks["acme-paid"]["contextId"], world.tasks["acme-awaiting"]["contextId"]):
        assert secret not in str(error)


PUSH_OPERATIONS = {"jsonrpc": ("set", "get", "list", "delete"), "rest": ("set", "get", "list")}
PUSH_CELLS = cells(VICTIMS, _intruders, PUSH_OPERATIONS, TENANT_NAMES, label="push")


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(("victim", "intruder", "operation", "transport"), PUSH_CELLS)
async def test_another_tenants_0_3_urls_cannot_touch_a_tasks_push_configs(
    world: World, victim: str, intruder: str, operation: str, transport: str
) -> None:
    async with world.http() as http:
        wire = WireV0_3(http, transport, intruder)
        error = await refused_as_nowhere(
            lambda task_id: wire.push_config(operation, task_id, "intruder-config"), world.tasks[victim]["id"]
        )

    assert error.reason in (
        "TASK_NOT_FOUND",
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        "VERSION_NOT_SUPPORTED",
    )


# -- controls: the owner's own calls succeed --------------------------------------------------------------


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("transport", BINDINGS_V0_3)
async def test_control_the_owner_reaches_its_tasks_at_its_urls(world: World, transport: str) -> None:
    async with world.http() as http:
        wire = WireV0_3(http, transport, "acme")
        states = {
            name: state_of(await wire.get_task(world.tasks[name]["id"]))
            for name in ("acme-awaiting", "acme-paid")
        }

    assert states == {"acme-awaiting": "input-required", "acme-paid": "completed"}


async def test_control_the_payment_refused_elsewhere_pays_at_the_owners_url(world: World) -> None:
    """Last in the module: it settles the payment every cell presented, once, to acme."""
    task = world.tasks["acme-awaiting"]
    opening = {tenant: world.chain.balance_of(pay_to) for tenant, pay_to in PAYEES.items()}
    async with world.http() as http:
        paid = await WireV0_3(http, "rest", "acme").send(submitted(task["id"], world.payments["v2"]))

    assert state_of(paid) == "completed", paid
    price = TWO_TENANTS["acme"][1]
    assert world.chain.balance_of(PAYEES["acme"]) == opening["acme"] + price
    assert world.chain.balance_of(PAYEES["globex"]) == opening["globex"]
    entries = [e for e in await ledger_entries(world.database_url) if e.task_id == task["id"]]
    assert [(e.tenant, e.amount, e.payer) for e in entries] == [
        ("acme", price, Account.from_key(world.payer_key).address)
    ]
