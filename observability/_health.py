"""The readiness endpoint (`/readyz`), built from named checks.

Liveness (`/healthz`, each app's own) says only that the process serves requests. Readiness runs every
check concurrently, each within a deadline, and answers 200 when all pass, else 503; the JSON body lists
every check with `ok` and a one-line `detail`, and `failing` names those that failed, so a probe's log
says what is wrong.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["READYZ_PATH", "Check", "CheckResult", "NotReadyError", "readiness_route", "run_checks"]

READYZ_PATH = "/readyz"

_DETAIL_CHARS = 300


class NotReadyError(Exception):
    """A readiness check failed; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class Check:
    """A named readiness check: `probe` returns a detail when the check passes, raises when it fails."""

    name: str
    probe: Callable[[], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What one check found."""

    name: str
    ok: bool
    detail: str


async def _run(check: Check, timeout_s: float) -> CheckResult:
    try:
        detail = await asyncio.wait_for(check.probe(), timeout_s)
    except TimeoutError:
        return CheckResult(check.name, False, f"no answer within {timeout_s:g} s")
    except NotReadyError as exc:
        return CheckResult(check.name, False, str(exc)[:_DETAIL_CHARS])
    except Exception as exc:  # noqa: BLE001 - any failure of a probe is the answer, never a 500
        return CheckResult(check.name, False, f"{type(exc).__name__}: {exc}"[:_DETAIL_CHARS])
    return CheckResult(check.name, True, detail[:_DETAIL_CHARS])


async def run_checks(checks: Sequence[Check], *, timeout_s: float = 5.0) -> list[CheckResult]:
    """Run `checks` concurrently, each within `timeout_s`; the results in the checks' order."""
    return list(await asyncio.gather(*(_run(check, timeout_s) for check in checks)))


def readiness_route(checks: Callable[[], Sequence[Check]], *, timeout_s: float = 5.0) -> Route:
    """`GET /readyz`, running the checks `checks()` returns at each request."""

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
