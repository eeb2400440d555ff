"""Version negotiation: the rules, then every case on every binding, route and the card over real HTTP."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import httpx
import pytest
from a2a.utils.errors import VersionNotSupportedError

from a2a_x402.merchant.edge import (
    AGENT_CARD_PATH,
    JSONRPC_PATH,
    REST_PATH,
    ProtocolVersion,
    negotiate_version,
)
from tests.fixtures.deadlines import HANG_S

from .conftest import TENANT_A
from .layers import MEMBERS_EXTENSION
from .wire import JSON

BOTH = (ProtocolVersion.V1_0, ProtocolVersion.V0_3)
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


@pytest.mark.parametrize(
    ("header", "query", "expected"),
    [
        ("1.0", None, "1.0"),
        ("1.0.3", None, "1.0"),
        (None, "1.0", "1.0"),
        ("", "1.0", "1.0"),
        ("1.0", "1.0.0", "1.0"),
        (None, None, "0.3"),
        ("", None, "0.3"),
        ("", "", "0.3"),
        ("0.3", None, "0.3"),
        ("0.3.1", None, "0.3"),
        (None, "0.3", "0.3"),
    ],
)
def test_negotiated_versions(header: str | None, query: str | None, expected: str) -> None:
    assert negotiate_version(header, query, BOTH) == ProtocolVersion(expected)


@pytest.mark.parametrize(
    ("header", "query", "requested"),
    [
        ("1.7", None, "1.7"),
        ("2.0", None, "2.0"),
        ("0.2", None, "0.2"),
        ("abc", None, "abc"),
        ("1", None, "1"),
        ("01.0", None, "01.0"),
        ("1.0-rc1", None, "1.0-rc1"),
        (None, "1.7", "1.7"),
        ("1.0", "0.3", "1.0,0.3"),
        ("0.3", "1.0", "0.3,1.0"),
        ("1.0", "abc", "1.0,abc"),
    ],
)
def test_unsupported_versions_are_refused(header: str | None, query: str | None, requested: str) -> None:
    with pytest.raises(VersionNotSupportedError) as failure:
        negotiate_version(header, query, BOTH)

    assert failure.value.data == {"requested": requested, "supported": "1.0,0.3"}


def test_a_version_not_served_is_refused() -> None:
    with pytest.raises(VersionNotSupportedError, match="serves 1.0"):
        negotiate_version(None, None, (ProtocolVersion.V1_0,))


# -- over HTTP ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One A2A route, the version it serves, and how to call it with an unknown task id.

    `answer` is what the route serves when the version is right: its JSON-RPC code and HTTP+JSON reason
    (TaskNotFound, or ExtendedAgentCardNotConfigured on the extended card routes).
    """

    name: str
    serves: str | None  # None: the card, served in every version
    method: str
    path: str
    rpc_method: str | None = None
    answer: tuple[int, str, int] = (-32001, "TASK_NOT_FOUND", 404)


_NO_EXTENDED_CARD = (-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", 400)
ROUTES = [
    Route("jsonrpc-1.0", "1.0", "POST", JSONRPC_PATH, "GetTask"),
    Route("jsonrpc-0.3", "0.3", "POST", JSONRPC_PATH, "tasks/get"),
    Route("rest-1.0", "1.0", "GET", REST_PATH + "/tasks/{id}"),
    Route("rest-0.3", "0.3", "GET", REST_PATH + "/v1/tasks/{id}"),
    Route("card", None, "GET", AGENT_CARD_PATH),
    # Streaming routes (SubscribeToTask; an unknown task is refused before any event).
    Route("jsonrpc-1.0-stream", "1.0", "POST", JSONRPC_PATH, "SubscribeToTask"),
    Route("jsonrpc-0.3-stream", "0.3", "POST", JSONRPC_PATH, "tasks/resubscribe"),
    Route("rest-1.0-stream", "1.0", "POST", REST_PATH + "/tasks/{id}:subscribe"),
    Route("rest-0.3-stream", "0.3", "POST", REST_PATH + "/v1/tasks/{id}:subscribe"),
    # Tenant routes: the interface URL, then the tenant.
    Route("rest-1.0-tenant", "1.0", "GET", REST_PATH + f"/{TENANT_A}/tasks/{{id}}"),
    Route("rest-1.0-tenant-stream", "1.0", "POST", REST_PATH + f"/{TENANT_A}/tasks/{{id}}:subscribe"),
    # The extended card (declared by the `MembersOnly` deployment, not configured).
    Route(
        "jsonrpc-1.0-extended-card", "1.0", "POST", JSONRPC_PATH, "GetExtendedAgentCard", _NO_EXTENDED_CARD
    ),
    Route(
        "jsonrpc-0.3-extended-card",
        "0.3",
        "POST",
        JSONRPC_PATH,
        "agent/getAuthenticatedExtendedCard",
        _NO_EXTENDED_CARD,
    ),
    Route("rest-1.0-extended-card", "1.0", "GET", REST_PATH + "/extendedAgentCard", answer=_NO_EXTENDED_CARD),
    Route(
        "rest-1.0-tenant-extended-card",
        "1.0",
        "GET",
        REST_PATH + f"/{TENANT_A}/extendedAgentCard",
        answer=_NO_EXTENDED_CARD,
    ),
    Route("rest-0.3-extended-card", "0.3", "GET", REST_PATH + "/v1/card", answer=_NO_EXTENDED_CARD),
]
# Repeated names as a tuple of pairs: httpx types a list of pairs with its own value union, invariantly.
Pairs = dict[str, str] | tuple[tuple[str, str], ...]


def jsonrpc_answer(response: httpx.Response) -> JSON:
    """The JSON-RPC answer, whether sent as one JSON body or as the one event of an SSE stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        [data] = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        answer: JSON = json.loads(data)
        return answer
    body: JSON = response.json()
    return body


async def call(http: httpx.AsyncClient, route: Route, headers: Pairs, query: Pairs) -> httpx.Response:
    """Call `route` about an unknown task."""
    task_id = str(uuid.uuid4())
    if route.rpc_method is not None:
        body: JSON = {"jsonrpc": "2.0", "id": "v-1", "method": route.rpc_method, "params": {"id": task_id}}
        return await http.post(route.path, json=body, headers=headers, params=query)
    return await http.request(route.method, route.path.format(id=task_id), headers=headers, params=query)


def assert_version_refused(route: Route, response: httpx.Response) -> None:
    """VersionNotSupported in the route's binding form, and no version claimed as served."""
    assert "a2a-version" not in response.headers
    if route.rpc_method is not None:
        assert response.status_code == 200
        body = jsonrpc_answer(response)
        assert body["id"] == "v-1"
        assert body["error"]["code"] == -32009
        details = body["error"]["data"]
    else:
        assert response.status_code == 400
        error = response.json()["error"]
        assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
        details = error["details"]
    [info] = [d for d in details if d["@type"] == _ERROR_INFO]
    assert (info["reason"], info["domain"]) == ("VERSION_NOT_SUPPORTED", "a2a-protocol.org")


def assert_served(route: Route, response: httpx.Response, version: str, *, versionless: bool = False) -> None:
    """The route's own answer in `version` (TaskNotFound in that version's form, or the card).

    `versionless`: the request named no version; it is served 0.3, and the card is the one for both versions.
    """
    assert response.headers["a2a-version"] == version
    if route.name == "card":
        assert response.status_code == 200
        assert ("supportedInterfaces" in response.json()) == (version == "1.0" or versionless)
        assert response.json().get("protocolVersion") == ("0.3" if version == "0.3" else None)
    elif route.rpc_method is not None:
        error = jsonrpc_answer(response)["error"]
        assert error["code"] == route.answer[0]
        # A 0.3 client gets the 0.3 error object; a 1.0 client the ErrorInfo details.
        assert isinstance(error.get("data"), list) == (version == "1.0")
    else:
        assert response.status_code == route.answer[2]
        assert response.json()["error"]["details"][0]["reason"] == route.answer[1]


CASES = [
    ({"A2A-Version": "1.0"}, {}, "1.0"),
    ({"A2A-Version": "1.0.3"}, {}, "1.0"),
    ({}, {"A2A-Version": "1.0"}, "1.0"),
    ({"A2A-Version": ""}, {"A2A-Version": "1.0"}, "1.0"),
    ({"A2A-Version": "1.0"}, {"A2A-Version": "1.0"}, "1.0"),
    ({}, {}, "0.3"),
    ({"A2A-Version": ""}, {}, "0.3"),
    ({"A2A-Version": "0.3"}, {}, "0.3"),
    ({}, {"A2A-Version": "0.3"}, "0.3"),
    ({"A2A-Version": "1.0"}, {"A2A-Version": "0.3"}, None),
    ({"A2A-Version": "0.3"}, {"A2A-Version": "1.0"}, None),
    ({"A2A-Version": "1.7"}, {}, None),
    ({"A2A-Version": "2.0"}, {}, None),
    ({"A2A-Version": "0.2"}, {}, None),
    ({"A2A-Version": "abc"}, {}, None),
    ({}, {"A2A-Version": "1.7"}, None),
]


@pytest.mark.parametrize(("headers", "query", "version"), CASES)
@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.name)
async def test_every_route_serves_exactly_the_negotiated_version(
    shared_merchant: str, route: Route, headers: dict[str, str], query: dict[str, str], version: str | None
) -> None:
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await call(http, route, headers, query)

    if version is None or (route.serves is not None and route.serves != version):
        assert_version_refused(route, response)
    else:
        named = [value for value in (*headers.values(), *query.values()) if value.strip()]
        assert_served(route, response, version, versionless=not named)


REPEATED: list[tuple[Pairs, Pairs]] = [
    ({}, (("A2A-Version", "1.0"), ("A2A-Version", "0.3"))),
    ({}, (("A2A-Version", "0.3"), ("A2A-Version", "1.0"))),
    ({}, (("A2A-Version", ""), ("A2A-Version", "1.0"))),
    ({"A2A-Version": "1.0"}, (("A2A-Version", "1.0"), ("A2A-Version", "0.3"))),
    ((("A2A-Version", "1.0"), ("A2A-Version", "0.3")), {}),
    ((("A2A-Version", "0.3"), ("A2A-Version", "1.0")), {}),
]


@pytest.mark.parametrize(("headers", "query"), REPEATED)
@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.name)
async def test_a_repeated_version_naming_different_versions_is_refused(
    shared_merchant: str, route: Route, headers: Pairs, query: Pairs
) -> None:
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await call(http, route, headers, query)

    assert_version_refused(route, response)


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.name)
async def test_a_version_repeated_alike_is_served(shared_merchant: str, route: Route) -> None:
    version = route.serves or "1.0"
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await call(
            http, route, (("A2A-Version", version), ("A2A-Version", version)), (("A2A-Version", version),)
        )

    assert_served(route, response, version)


@pytest.mark.parametrize(
    ("version", "method", "params"),
    [
        ("1.0", "message/send", {"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]}}),
        ("0.3", "SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
        ("0.3", "ListTasks", {}),
    ],
)
async def test_an_operation_of_the_other_version_is_refused_by_name(
    shared_merchant: str, version: str, method: str, params: JSON
) -> None:
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await http.post(
            JSONRPC_PATH,
            headers={"A2A-Version": version},
            json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params},
        )

    error = response.json()["error"]
    assert error["code"] == -32009
    assert repr(method) in error["message"]
    other = "0.3" if version == "1.0" else "1.0"
    assert error["data"][0]["metadata"] == {"requested": version, "supported": other}


async def test_activated_extensions_are_echoed_per_version(shared_merchant: str) -> None:
    unknown = "https://example.org/ext/members/v2"
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        current = await call(
            http, ROUTES[0], {"A2A-Version": "1.0", "A2A-Extensions": f"{unknown}, {MEMBERS_EXTENSION}"}, {}
        )
        legacy_header = await call(http, ROUTES[1], {"X-A2A-Extensions": MEMBERS_EXTENSION}, {})
        legacy_on_current = await call(
            http, ROUTES[0], {"A2A-Version": "1.0", "X-A2A-Extensions": MEMBERS_EXTENSION}, {}
        )
        none = await call(http, ROUTES[2], {"A2A-Version": "1.0", "A2A-Extensions": unknown}, {})

    assert current.headers["a2a-extensions"] == MEMBERS_EXTENSION
    assert "x-a2a-extensions" not in current.headers
    assert legacy_header.headers["a2a-extensions"] == MEMBERS_EXTENSION
    assert legacy_header.headers["x-a2a-extensions"] == MEMBERS_EXTENSION
    # 1.0 has no X- header: a 1.0 request carrying only it activates nothing.
    assert "a2a-extensions" not in legacy_on_current.headers
    assert "a2a-extensions" not in none.headers
