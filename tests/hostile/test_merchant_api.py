"""schemathesis against the reference merchant's A2A 1.0 surface and billing API, on the dev chain and SQLite.

The merchant serves three tenants (default, `acme`, `globex`) with billing tokens; `acme` has a task
waiting for payment and a paid one, the default tenant one waiting for payment, so generated requests can
name live tasks, contexts, tenants, tokens and webhook events (see `openapi.merchant_document`). No
generated request can carry a payment a payer signed, so the happy path is out of reach and the state
may move only in these ways, checked after every request:

* a refused request (HTTP status >= 400, a JSON-RPC error, a stream whose first event is an error) and
  any read changes nothing at all;
* an accepted SendMessage, stream or CancelTask changes only tasks and payment offers: new rows only for
  task ids its answer names, changed rows only for task ids its request names;
* the books never move: no ledger row, webhook event or delivery, no settlement claim, relayer nonce and
  payee balances as they were.

The document is fuzzed in parts (`_PARTS`), a test and a fresh merchant each: each part's run stays well
inside the per-test guard on a machine other work keeps busy (the whole took over 300 s there).

Besides the generated run, non-finite numbers (NaN, Infinity, 1e999), which Python's JSON parser accepts
but protobuf cannot serialize back, are sent where a `Struct` is read.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from schemathesis.core.transport import Response

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import MerchantStarter, RunningMerchant

from .fuzzing import AnyCase, fuzz_operations
from .merchants import A2A_HEADERS, PAYEES, TOKENS, pay, quote, tenants_toml
from .openapi import merchant_document
from .state import TASK_TABLES, Snapshot, changes, take_snapshot, wait_until_quiet

# The document's explicit examples (new-task messages, sent before the draws) reach the handlers on every
# run; the draws (about 2 % of SendMessage draws are a message a client could send) are for the refusals.
_EXAMPLES_PER_OPERATION = 20


@dataclass(frozen=True)
class _Part:
    """A part of the document fuzzed by one test (each under its own guard, however busy the machine), with
    what its run must reach: the labels of the requests its explicit examples make a task with, and the
    statuses it must get (the handlers' answers and refusals)."""

    paths: Callable[[str], bool]
    reached: tuple[str, ...]
    statuses: frozenset[int]


_TENANT_REST = f"{REST_PATH}/{{tenant}}"
_PARTS = {
    # A task by each binding, sent and streamed, with the default tenant and with a named one (acme, the
    # explicit examples' tenant).
    "rest": _Part(
        lambda path: path.startswith(f"{REST_PATH}/") and not path.startswith(_TENANT_REST),
        (f"POST {REST_PATH}/message:send", f"POST {REST_PATH}/message:stream"),
        frozenset({200, 400, 404}),
    ),
    # An unknown tenant's 404 needs a drawn message valid enough to pass its own checks first (about 2 % of
    # draws), so no run is sure to get one here; the tasks part and the tenant matrix answer it every time.
    "rest-tenant-messages": _Part(
        lambda path: path.startswith(_TENANT_REST) and not path.startswith(f"{_TENANT_REST}/tasks/"),
        (f"POST {REST_PATH}/acme/message:send", f"POST {REST_PATH}/acme/message:stream"),
        frozenset({200, 400}),
    ),
    # The operations on one task under a named tenant: what is drawn there is refused (404, 400).
    "rest-tenant-tasks": _Part(
        lambda path: path.startswith(f"{_TENANT_REST}/tasks/"), (), frozenset({400, 404})
    ),
    "jsonrpc": _Part(
        lambda path: path == JSONRPC_PATH,
        (f"POST {JSONRPC_PATH} SendMessage", f"POST {JSONRPC_PATH} SendStreamingMessage"),
        frozenset({200}),
    ),
    # Wrong tokens refused (401, then 429 from the throttle of wrong credentials).
    "billing": _Part(lambda path: path.startswith("/tenants/"), (), frozenset({401})),
}
_NO_RECONCILE_S = 3600.0
_MUTATING_RPC_METHODS = frozenset(
    {"SendMessage", "SendStreamingMessage", "CancelTask", "CreateTaskPushNotificationConfig"}
)
_MUTATING_REST_SUFFIXES = (
    "/message:send",
    "/message:stream",
    ":cancel",
    "/pushNotificationConfigs",
    "/redeliver",
)


def _rpc_method(case: AnyCase) -> str | None:
    body = case.body if isinstance(case.body, dict) else {}
    method = body.get("method")
    return method if isinstance(method, str) else None


def _is_mutating(case: AnyCase) -> bool:
    if case.operation.path == JSONRPC_PATH:
        return _rpc_method(case) in _MUTATING_RPC_METHODS
    return case.method.upper() == "POST" and case.formatted_path.endswith(_MUTATING_REST_SUFFIXES)


def _events(text: str) -> list[Any]:
    events = []
    for line in text.splitlines():
        if line.startswith("data:"):
            try:
                events.append(json.loads(line[5:]))
            except json.JSONDecodeError:
                events.append(None)
    return events


def _accepted(response: Response) -> bool:
    """Whether the merchant took the request: 2xx, no JSON-RPC error, no error as the stream's first event."""
    if response.status_code >= 300:
        return False
    if "text/event-stream" in (response.headers.get("content-type") or [""])[0]:
        events = _events(response.text)
        return bool(events) and isinstance(events[0], dict) and "error" not in events[0]
    try:
        body = json.loads(response.text)
    except json.JSONDecodeError:
        return True
    return not (isinstance(body, dict) and "error" in body)


def _request_text(case: AnyCase) -> str:
    return json.dumps([case.path_parameters, case.query, case.body], default=str)


def _explained(case: AnyCase, response: Response, moved: dict[str, dict[str, list[Any]]]) -> list[str]:
    """The changes an accepted mutating request is not allowed to make (empty when all are explained)."""
    unexplained = [f"{table}: {found}" for table, found in moved.items() if table not in TASK_TABLES]
    for table in TASK_TABLES:
        found = moved.get(table, {})
        unexplained += [f"{table} removed {key}" for key in found.get("removed", [])]
        unexplained += [
            f"{table} added {key}" for key in found.get("added", []) if str(key[0]) not in response.text
        ]
        unexplained += [
            f"{table} changed {key}"
            for key in found.get("changed", [])
            if str(key[0]) not in _request_text(case)
        ]
    return unexplained


@pytest.fixture
def three_tenants(start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path) -> RunningMerchant:
    """The reference merchant on SQLite serving the default tenant, `acme` and `globex`, with tokens.

    Its reconciler does not run during the test: it would finalize the paid settlement (a ledger entry and
    a webhook event) at an arbitrary moment of the run, which would look like a request's doing.
    """
    tenants_file = tenants_toml(tmp_path / "tenants.toml")
    return start_merchant(sqlite_url, tenants_file=tenants_file, reconcile_interval_s=_NO_RECONCILE_S)


@pytest.fixture
def a2a(three_tenants: RunningMerchant) -> Iterator[httpx.Client]:
    """A synchronous A2A 1.0 client of the merchant with the x402 extension activated."""
    with httpx.Client(base_url=three_tenants.base_url, headers=A2A_HEADERS, timeout=HANG_S) as client:
        yield client


@pytest.mark.parametrize("part", list(_PARTS))
def test_generated_requests_never_get_a_server_error_and_change_only_what_they_may(
    chain: DevChain,
    three_tenants: RunningMerchant,
    a2a: httpx.Client,
    new_payer: Callable[..., str],
    part: str,
) -> None:
    fuzzed = _PARTS[part]
    payer_key = new_payer()
    awaiting, default_awaiting = quote(a2a, "acme"), quote(a2a, "")
    paid = pay(a2a, "acme", quote(a2a, "acme"), payer_key)
    bearer = {"authorization": f"Bearer {TOKENS['acme']}"}
    events = a2a.get("/tenants/acme/webhooks/events", headers=bearer).json()["events"]
    database = three_tenants.database_url
    payees = list(PAYEES.values())
    document_values: dict[str, Any] = {
        "tenants": ["", "acme", "globex", "ghost"],
        "tokens": [*TOKENS.values(), "wrong-token-0123456789abcdef"],
        "task_ids": [awaiting["id"], default_awaiting["id"], paid["id"]],
        "finished_task_ids": [paid["id"]],
        "context_ids": [awaiting["contextId"], paid["contextId"], default_awaiting["contextId"]],
        "event_ids": [event["id"] for event in events],
        "addresses": [chain.asset, *payees, Account.from_key(payer_key).address],
        "networks": [chain.network],
    }
    start = wait_until_quiet(database, chain, payees)
    last: list[Snapshot] = [start]
    accepted_changes: list[str] = []

    def check_state(case: AnyCase, response: Response) -> None:
        mutating, accepted = _is_mutating(case), _accepted(response)
        if mutating and accepted:
            # Work the answer left running (a task returned immediately) must be done before comparing.
            after = wait_until_quiet(database, chain, payees, settle_s=0.1)
        else:
            after = take_snapshot(database, chain, payees)
        moved = changes(last[0], after)
        last[0] = after
        if not moved:
            return
        label = f"{case.method} {case.formatted_path} {_rpc_method(case) or ''} -> {response.status_code}"
        assert accepted and mutating, f"{label} (refused or read-only) changed {moved}\n{_request_text(case)}"
        unexplained = _explained(case, response, moved)
        assert not unexplained, f"{label} made unexplained changes {unexplained}\n{_request_text(case)}"
        accepted_changes.append(label)

    statuses = fuzz_operations(
        merchant_document(**document_values),
        three_tenants.base_url,
        max_examples=_EXAMPLES_PER_OPERATION,
        headers=A2A_HEADERS,
        after=check_state,
        paths=fuzzed.paths,
    )

    assert all(status < 500 for status in statuses), statuses
    # The run reached the handlers (tasks made, reads answered) and the refusals (4xx).
    assert all(statuses[status] for status in fuzzed.statuses), statuses
    unreached = [
        label for label in fuzzed.reached if not any(made.startswith(label) for made in accepted_changes)
    ]
    assert not unreached, f"the explicit examples did not reach the handlers: {unreached}"
    books_moved = set(changes(start, take_snapshot(database, chain, payees))) - set(TASK_TABLES)
    assert not books_moved, f"the run moved the books: {books_moved}"


def _assert_unchanged(before: Snapshot, database_url: str, chain: DevChain) -> None:
    moved = changes(before, wait_until_quiet(database_url, chain, settle_s=0.2))
    assert not moved, f"the refused request changed {moved}"


# -- non-finite numbers ---------------------------------------------------------------------------------

# Python's json module reads these; orjson, RFC 8259 and protobuf's serializer do not.
_NON_FINITE = {"NaN": "NaN", "Infinity": "Infinity", "overflow": "-1e999"}


def _message_text(where: str, number: str) -> str:
    message_id = uuid.uuid4()
    if where == "message metadata":
        extra = f', "metadata": {{"note": {number}}}'
        parts = '[{"text": "hi"}]'
    elif where == "extension payload":
        extra = (
            f', "extensions": ["{EXTENSION_URI}"], "metadata": {{"{EXTENSION_URI}": '
            f'{{"status": "payment-submitted", "payload": {{"x402Version": {number}}}}}}}'
        )
        parts = '[{"text": "hi"}]'
    elif where == "part metadata":
        extra = ""
        parts = f'[{{"text": "hi", "metadata": {{"note": {number}}}}}]'
    else:
        extra = ""
        parts = f'[{{"data": {{"note": {number}}}}}]'
    return f'{{"messageId": "{message_id}", "role": "ROLE_USER", "parts": {parts}{extra}}}'


@pytest.mark.parametrize("number", list(_NON_FINITE.values()), ids=list(_NON_FINITE))
@pytest.mark.parametrize("where", ["message metadata", "extension payload", "part metadata", "data part"])
@pytest.mark.parametrize("binding", ["rest", "jsonrpc"])
def test_a_non_finite_number_in_a_message_is_refused_as_invalid_not_an_internal_error(
    chain: DevChain, three_tenants: RunningMerchant, a2a: httpx.Client, binding: str, where: str, number: str
) -> None:
    """Pinned: today each of these is a 500 / JSON-RPC -32603 (protobuf cannot serialize the number back)."""
    database = three_tenants.database_url
    before = take_snapshot(database, chain)
    message = _message_text(where, number)
    headers = {"content-type": "application/json"}
    if binding == "rest":
        response = a2a.post(f"{REST_PATH}/message:send", content=f'{{"message": {message}}}', headers=headers)
    else:
        body = f'{{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {{"message": {message}}}}}'
        response = a2a.post(JSONRPC_PATH, content=body, headers=headers)
    # The state first: a change made by a refused request is the worse half of the failure.
    _assert_unchanged(before, database, chain)
    if binding == "rest":
        assert response.status_code == 400, response.text
    else:
        error = response.json()["error"]
        assert error["code"] in (-32700, -32602), error


# -- messages the SDK's task helper refuses, and bodies that are not UTF-8 --------------------------------


def _send(a2a: httpx.Client, binding: str, content: bytes) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if binding == "rest":
        return a2a.post(
            f"{REST_PATH}/message:send", content=b'{"message": ' + content + b"}", headers=headers
        )
    body = b'{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": ' + content + b"}}"
    return a2a.post(JSONRPC_PATH, content=body, headers=headers)


def _assert_invalid(response: httpx.Response, binding: str) -> None:
    if binding == "rest":
        assert response.status_code == 400, response.text
    else:
        error = response.json()["error"]
        assert error["code"] in (-32700, -32600, -32602), error


@pytest.mark.parametrize(
    "message",
    [
        pytest.param({"role": "ROLE_AGENT", "parts": [{"text": "hi"}]}, id="agent role"),
        pytest.param({"role": "ROLE_USER", "parts": [{"text": ""}]}, id="empty text part"),
        pytest.param(
            {"role": "ROLE_USER", "parts": [{"text": "hi"}, {"text": ""}]}, id="second text part empty"
        ),
    ],
)
@pytest.mark.parametrize("binding", ["rest", "jsonrpc"])
def test_a_message_no_task_can_start_from_is_refused_as_invalid_not_an_internal_error(
    chain: DevChain, three_tenants: RunningMerchant, a2a: httpx.Client, binding: str, message: dict[str, Any]
) -> None:
    """Pinned: a2a-sdk's `new_task_from_user_message`, called by `PaymentExecutor.execute` for a new task,
    raises ValueError on these, which both bindings answer as an internal error (500 / -32603)."""
    database = three_tenants.database_url
    before = take_snapshot(database, chain)

    response = _send(a2a, binding, json.dumps({"messageId": str(uuid.uuid4()), **message}).encode())

    _assert_unchanged(before, database, chain)
    _assert_invalid(response, binding)


@pytest.mark.parametrize("operation", ["message:send", "message:stream"])
@pytest.mark.parametrize("tenant", ["", "acme"])
def test_a_body_that_is_not_utf8_is_refused_as_invalid_not_an_internal_error(
    three_tenants: RunningMerchant, a2a: httpx.Client, operation: str, tenant: str
) -> None:
    """Pinned: the SDK's HTTP+JSON dispatcher decodes the body as UTF-8 unguarded (UnicodeDecodeError: 500).
    JSON-RPC already answers -32700."""
    root = f"{REST_PATH}/{tenant}" if tenant else REST_PATH

    response = a2a.post(
        f"{root}/{operation}", content=b'{"message": "\xff"}', headers={"content-type": "application/json"}
    )

    assert response.status_code == 400, response.text
