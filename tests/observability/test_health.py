"""The readiness runner: every check runs, a slow one is cut at its deadline, a failing one is named."""

from __future__ import annotations

import asyncio

from observability import Check, NotReadyError, run_checks


async def test_each_check_is_answered_within_its_deadline() -> None:
    async def fine() -> str:
        return "fine"

    async def refused() -> str:
        raise NotReadyError("no funds")

    async def broken() -> str:
        raise OSError("connection refused")

    async def stuck() -> str:
        await asyncio.Event().wait()
        return "never"

    results = await run_checks(
        [Check("a", fine), Check("b", refused), Check("c", broken), Check("d", stuck)], timeout_s=0.2
    )

    assert [(r.name, r.ok, r.detail) for r in results] == [
        ("a", True, "fine"),
        ("b", False, "no funds"),
        ("c", False, "OSError: connection refused"),
        ("d", False, "no answer within 0.2 s"),
    ]
