"""Why something got no answer or failed, in words a person reads: from real failures (a closed port over
httpx and aiohttp, a name that does not resolve, a database that is not there), never an exception's class
name or repr."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import httpx
import pytest
from sqlalchemy import text

from a2a_x402.observability import failure_reason, unreachable_reason
from a2a_x402.storage import create_engine
from tests.fixtures.servers import free_port

# An exception's class (`ConnectError`, `OSError: `) or repr (`ConnectError('...')`) in the words.
_PYTHON_WORDS = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\w+\('|Errno")


async def _raised(work: object) -> BaseException:
    try:
        await work  # type: ignore[misc]
    except Exception as exc:  # noqa: BLE001 - the failure is what the test reads
        return exc
    raise AssertionError("it did not fail")


async def _httpx_get(url: str) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        await client.get(url)


async def _aiohttp_get(url: str) -> None:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        await response.read()


async def _postgres_at_a_closed_port() -> None:
    engine = create_engine(f"postgresql+asyncpg://x402@127.0.0.1:{free_port()}/none")
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    finally:
        await engine.dispose()


async def _group() -> None:
    async with asyncio.TaskGroup() as group:
        group.create_task(_httpx_get(f"http://127.0.0.1:{free_port()}/"))


@pytest.mark.parametrize(
    ("work", "said"),
    [
        (lambda: _httpx_get(f"http://127.0.0.1:{free_port()}/"), "connection refused"),
        (lambda: _aiohttp_get(f"http://127.0.0.1:{free_port()}/"), "connection refused"),
        (lambda: _httpx_get("http://no-such-host.invalid/"), "its host name does not resolve"),
        (lambda: _aiohttp_get("http://no-such-host.invalid/"), "its host name does not resolve"),
        (_postgres_at_a_closed_port, "connection refused"),
        (_group, "connection refused"),
    ],
    ids=["httpx", "aiohttp", "httpx-dns", "aiohttp-dns", "asyncpg", "task-group"],
)
async def test_a_request_that_got_no_answer_says_why_in_words(work: object, said: str) -> None:
    failure = await _raised(work())  # type: ignore[operator]

    assert unreachable_reason(failure) == failure_reason(failure) == said


def test_any_other_failure_is_its_message_without_a_class_named_in_it() -> None:
    try:
        try:
            terms: dict[str, str] = {}
            terms["payTo"]  # noqa: B018 - the failure is what the test reads
        except KeyError as missing:
            raise RuntimeError from missing
    except RuntimeError as wrapped:
        missing_key = failure_reason(wrapped)
    said = {
        "ValueError: ValueError: amount must be a number\nsecond line": "amount must be a number",
        "(psycopg.errors.UndefinedTable) relation does not exist": "relation does not exist",
        "": "it failed without saying why",
    }

    assert missing_key == "payTo is missing"
    for message, words in said.items():
        assert failure_reason(RuntimeError(message)) == words
    assert unreachable_reason(RuntimeError("no cause")) == "no answer"
    assert not _PYTHON_WORDS.search(" ".join([missing_key, *said.values()]))
