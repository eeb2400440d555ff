"""The one model of a check, on its three surfaces: the runner answers every check within its deadline
under the check's name (what a probe raised in words, never its class), the table and `/readyz` render the
same results."""

from __future__ import annotations

import asyncio

import httpx
from starlette.applications import Starlette

from a2a_x402.observability import Check, CheckResult, readiness_route, render_checks, run_checks
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import free_port


async def _fine() -> CheckResult:
    return CheckResult.passed("a", "fine")


async def _short() -> CheckResult:
    return CheckResult.problem("b", "no funds", fatal=False)


async def _broken() -> CheckResult:
    raise OSError("connection refused\nand a second line that is not a detail")


async def _stuck() -> CheckResult:
    await asyncio.Event().wait()
    raise AssertionError("never")


async def test_each_check_is_answered_within_its_deadline() -> None:
    results = await run_checks(
        [Check("a", _fine), Check("b", _short), Check("c", _broken), Check("d", _stuck)], timeout_s=0.2
    )

    assert results == [
        CheckResult("a", True, "fine"),
        CheckResult("b", False, "no funds", fatal=False),
        CheckResult("c", False, "connection refused"),
        CheckResult("d", False, "no answer within 0.2 s"),
    ]


async def test_a_result_takes_its_checks_name() -> None:
    # A shared probe is named by the surface that runs it (`/readyz` calls the network check `chain`).
    (result,) = await run_checks([Check("chain", _fine)], timeout_s=1)

    assert result == CheckResult("chain", True, "fine")


async def test_an_answered_check_runs_as_the_others() -> None:
    known = CheckResult.problem("relayer", "X402_RELAYER_KEY is not set")

    assert await run_checks([Check.answered(known)], timeout_s=1) == [known]


def test_the_table_has_a_row_per_check() -> None:
    table = render_checks(
        [CheckResult("network", True, "chain 1"), CheckResult("skill prices", False, "typo")]
    )

    assert table.splitlines() == [
        "check         result   detail",
        "network       ok       chain 1",
        "skill prices  problem  typo",
    ]


async def test_readyz_fails_on_any_problem_fatal_or_not() -> None:
    app = Starlette(routes=[readiness_route(lambda: [Check("a", _fine), Check("b", _short)])])

    async with httpx.AsyncClient(
        timeout=HANG_S, transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        response = await client.get("/readyz")

    assert response.status_code == 503
    assert response.headers["cache-control"] == "no-store"
    assert response.json() == {
        "status": "not ready",
        "failing": ["b"],
        "checks": {"a": {"ok": True, "detail": "fine"}, "b": {"ok": False, "detail": "no funds"}},
    }


async def test_readyz_says_what_a_probe_raised_in_words_never_its_class() -> None:
    closed = f"http://127.0.0.1:{free_port()}"

    async def node() -> CheckResult:
        async with httpx.AsyncClient(timeout=HANG_S) as client:
            await client.get(closed)
        raise AssertionError("a closed port answered")

    async def database() -> CheckResult:
        raise OSError("Multiple exceptions: [Errno 111] Connect call failed ('127.0.0.1', 5432)")

    async def shape() -> CheckResult:
        return {"answer": 1}["result"]  # type: ignore[return-value]

    async def sql() -> CheckResult:
        raise RuntimeError("(sqlite3.OperationalError) unable to open database file\n[SQL: SELECT 1]")

    checks = [Check("node", node), Check("database", database), Check("shape", shape), Check("sql", sql)]
    app = Starlette(routes=[readiness_route(lambda: checks)])

    async with httpx.AsyncClient(
        timeout=HANG_S, transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        body = (await client.get("/readyz")).json()

    assert {name: check["detail"] for name, check in body["checks"].items()} == {
        "node": "connection refused",
        "database": "connection refused",
        "shape": "result is missing",
        "sql": "unable to open database file",
    }
