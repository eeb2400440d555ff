"""Wrong caller credentials are throttled per client network on every A2A binding, one count for all, and the
right one is never locked out (issue 25, point 6): 50 wrong API keys from one address, then the right key.
A real edge on SQLite serving HTTP and gRPC."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import cast

import grpc
import grpc.aio
import httpx
import pytest

from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
from a2a_x402.merchant.edge._authn import REFUSED_MESSAGE
from a2a_x402.observability import FailureThrottle
from tests.fixtures.a2a_grpc import GrpcCalls, a2a_stub
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import free_port

from .conftest import a2a_http, a2a_http_as, issue_key, running_merchant
from .wire import binding, start_quote

LIMIT = 10
WRONG = 50


@pytest.fixture
def base_url(sqlite_url: str) -> Iterator[str]:
    """A merchant edge with the throttle of the merchant's defaults (10 wrong ones in 5 minutes)."""
    with running_merchant(sqlite_url, grpc_port=free_port(), throttle=FailureThrottle()) as url:
        yield url


def _wrong_key(n: int) -> str:
    return f"x402k_{n:043d}"


@pytest.mark.parametrize("path", [JSONRPC_PATH, f"{REST_PATH}/tasks"])
async def test_fifty_wrong_keys_then_the_right_one_over_http(
    base_url: str, sqlite_url: str, path: str
) -> None:
    key = await issue_key(sqlite_url, "", "alice")
    async with a2a_http(base_url) as http:
        answers = [
            await http.post(
                path,
                json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
                headers={"Authorization": f"Bearer {_wrong_key(n)}"},
            )
            if path == JSONRPC_PATH
            else await http.get(path, headers={"Authorization": f"Bearer {_wrong_key(n)}"})
            for n in range(WRONG)
        ]
    assert [answer.status_code for answer in answers] == [401] * LIMIT + [429] * (WRONG - LIMIT)
    throttled = answers[-1]
    assert 1 <= int(throttled.headers["retry-after"]) <= 300
    assert throttled.headers["cache-control"] == "no-store"
    assert throttled.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert "too many refused credentials" in throttled.json()["error"]["message"]
    assert answers[0].json()["error"]["message"] == REFUSED_MESSAGE

    async with a2a_http_as(base_url, key) as right:
        task = await start_quote(binding("jsonrpc", right))  # the right key still works from there
        assert (await binding("rest", right).get_task(task["id"]))["id"] == task["id"]
    # Another address is not throttled (loopback: any 127/8 source address reaches the server).
    elsewhere = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(
        timeout=HANG_S, base_url=base_url, transport=elsewhere, headers={"A2A-Version": "1.0"}
    ) as other:
        answer = await other.get(f"{REST_PATH}/tasks", headers={"Authorization": f"Bearer {_wrong_key(0)}"})
    assert answer.status_code == 401


async def test_fifty_wrong_keys_then_the_right_one_over_grpc_counted_with_http(
    base_url: str, sqlite_url: str
) -> None:
    key = await issue_key(sqlite_url, "", "bob")
    async with a2a_http(base_url) as http:
        target = await GrpcCalls(http, "").target()
        request = GrpcCalls(http, "").request("ListTasks", {})
        codes: list[grpc.StatusCode] = []
        trailers: list[str | None] = []
        async with grpc.aio.insecure_channel(target) as channel:
            stub = a2a_stub(channel)
            for n in range(WRONG // 2):
                metadata = [("a2a-version", "1.0"), ("authorization", f"Bearer {_wrong_key(n)}")]
                with pytest.raises(grpc.aio.AioRpcError) as failure:
                    await stub.ListTasks(request, metadata=metadata, timeout=10)
                codes.append(failure.value.code())
                # grpc.aio's trailers are (key, value) pairs; the stubs type them as objects.
                pairs = cast("Iterable[tuple[str, str]]", failure.value.trailing_metadata() or ())
                trailers.append(dict(pairs).get("retry-after"))
            # The other half over HTTP+JSON: one count for every binding.
            for n in range(WRONG // 2, WRONG):
                answer = await http.get(
                    f"{REST_PATH}/tasks", headers={"Authorization": f"Bearer {_wrong_key(n)}"}
                )
                assert answer.status_code == 429
            right = await stub.ListTasks(
                request, metadata=[("a2a-version", "1.0"), ("authorization", f"Bearer {key}")], timeout=10
            )
    unauthenticated = grpc.StatusCode.UNAUTHENTICATED
    exhausted = grpc.StatusCode.RESOURCE_EXHAUSTED
    assert codes == [unauthenticated] * LIMIT + [exhausted] * (WRONG // 2 - LIMIT)
    assert 1 <= int(trailers[-1] or 0) <= 300
    assert trailers[0] is None
    assert list(right.tasks) == []  # the right key is served


async def test_anonymous_calls_and_the_right_key_are_never_counted(base_url: str, sqlite_url: str) -> None:
    key = await issue_key(sqlite_url, "", "carol")
    async with a2a_http_as(base_url, key) as right, a2a_http(base_url) as anonymous:
        for _ in range(2 * LIMIT):
            assert (await right.get(f"{REST_PATH}/tasks")).status_code == 200
            assert (await anonymous.get(f"{REST_PATH}/tasks")).status_code == 200
        await start_quote(binding("jsonrpc", anonymous))
        wrong = await anonymous.get(
            f"{REST_PATH}/tasks", headers={"Authorization": f"Bearer {_wrong_key(1)}"}
        )
    assert wrong.status_code == 401
