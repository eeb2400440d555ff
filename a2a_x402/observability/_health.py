"""Checks, the one model of "is this deployment healthy?", and the surfaces that render them.

A `Check` is a name and a probe; the probe returns a `CheckResult`: `ok`, or a problem described in one
line, `fatal` when a service must refuse to start on it (a relayer low on gas money is a problem worth
fixing, yet the service can serve). A probe catches the failures it expects and words them; `run_checks`
runs several at once, each within a deadline, and turns anything else a probe raises (or a deadline
missed) into a fatal problem under the check's name, in words (`failure_reason`: `connection refused`, not
`OSError: [Errno 111] ...`), so one broken dependency never hides the others' results. Details never hold
a secret: no key, no RPC URL (it may carry an API key), no password.

The results are rendered three ways: `readiness_route` serves them as `GET /readyz` (200 when every check
passes, else 503; the JSON body lists every check with `ok` and `detail`, and `failing` names those that
failed, so a probe's log says what is wrong); `render_checks` prints them as the `check` commands' table;
and `serve` refuses to start on the fatal ones (the CLIs' `refuse_on_fatal`). Liveness (`/healthz`) is each
app's own and checks nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ._unreachable import failure_reason

__all__ = ["READYZ_PATH", "Check", "CheckResult", "readiness_route", "render_checks", "run_checks"]

READYZ_PATH = "/readyz"

_DETAIL_CHARS = 300


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check: `ok`, or a problem described in `detail` (one line, no secret).

    `fatal` says whether a service must refuse to start on the problem; readiness fails on any problem.
    """

    name: str
    ok: bool
    detail: str
    fatal: bool = True

    @classmethod
    def passed(cls, name: str, detail: str) -> CheckResult:
        """A check that found nothing wrong."""
        return cls(name=name, ok=True, detail=detail)

    @classmethod
    def problem(cls, name: str, detail: str, *, fatal: bool = True) -> CheckResult:
        """A check that found a problem."""
        return cls(name=name, ok=False, detail=detail, fatal=fatal)


@dataclass(frozen=True, slots=True)
class Check:
    """A named check: `probe` looks (and may be run again, as each `/readyz` request does)."""

    name: str
    probe: Callable[[], Awaitable[CheckResult]]

    @classmethod
    def answered(cls, result: CheckResult) -> Check:
        """A check answered before it runs (a setting that does not load), listed as the others are."""

        async def probe() -> CheckResult:
            return result

        return cls(result.name, probe)


def _one_line(text: str) -> str:
    """An exception's text as a detail: its first line (SQLAlchemy appends the SQL and a link), bounded."""
    lines = text.strip().splitlines()
    return (lines[0] if lines else "")[:_DETAIL_CHARS]


async def _run(check: Check, timeout_s: float) -> CheckResult:
    try:
        async with asyncio.timeout(timeout_s):
            result = await check.probe()
    except TimeoutError:
        return CheckResult.problem(check.name, f"no answer within {timeout_s:g} s")
    except Exception as exc:  # noqa: BLE001 - a probe that breaks must not hide the others' results
        return CheckResult.problem(check.name, _one_line(failure_reason(exc)))
    return replace(result, name=check.name)


async def run_checks(checks: Sequence[Check], *, timeout_s: float) -> list[CheckResult]:
    """Run `checks` concurrently, each within `timeout_s`; their results in the checks' order, each under
    its check's name."""
    return list(await asyncio.gather(*(_run(check, timeout_s) for check in checks)))


def render_checks(results: Sequence[CheckResult]) -> str:
    """The results as a table: one line per check with its name, `ok` or `problem`, and the detail."""
    rows = [("check", "result", "detail")] + [
        (result.name, "ok" if result.ok else "problem", result.detail) for result in results
    ]
    name_width = max(len(row[0]) for row in rows)
    status_width = max(len(row[1]) for row in rows)
    return "\n".join(
        f"{name:<{name_width}}  {status:<{status_width}}  {detail}".rstrip() for name, status, detail in rows
    )


def readiness_route(checks: Callable[[], Sequence[Check]], *, timeout_s: float = 5.0) -> Route:
    """`GET /readyz`, running the checks `checks()` returns at each request (503 on any problem)."""

    async def readyz(_request: Request) -> JSONResponse:
        results = await run_checks(checks(), timeout_s=timeout_s)
        failing = [r.name for r in results if not r.ok]
        body = {
            "status": "not ready" if failing else "ready",
            "failing": failing,
            "checks": {r.name: {"ok": r.ok, "detail": r.detail} for r in results},
        }
        return JSONResponse(body, status_code=503 if failing else 200, headers={"Cache-Control": "no-store"})

    return Route(READYZ_PATH, readyz, methods=["GET"])
