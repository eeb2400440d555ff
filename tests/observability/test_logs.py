"""`configure_logging`: JSON lines with the context fields, text lines with them appended, UTC times, a bad
setting as one line naming its variable; and the access log's line per request."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from a2a_x402.observability import (
    AccessLogMiddleware,
    LogSettings,
    LogSettingsError,
    configure_logging,
    log_context,
)
from tests.fixtures.deadlines import HANG_S


def test_json_lines_carry_time_level_logger_message_and_context(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LogSettings(log_format="json", log_level="info", _env_file=None))
    logger = logging.getLogger("merchant.test")

    with log_context(task_id="task-1", tenant="acme"):
        logger.info("paid %s", "task-1", extra={"outcome": "settled"})
    logger.debug("not at INFO")
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")

    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first.pop("time").endswith("+00:00")
    assert first == {
        "level": "INFO",
        "logger": "merchant.test",
        "message": "paid task-1",
        "task_id": "task-1",
        "tenant": "acme",
        "outcome": "settled",
    }
    assert "task_id" not in second  # the context ended with its block
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exception"]


def test_text_lines_append_the_context_fields(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LogSettings(log_level="WARNING", _env_file=None))

    with log_context(task_id="task-2", tenant=None):
        logging.getLogger("facilitator.test").warning("refused")
    logging.getLogger("facilitator.test").info("quiet")

    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(" WARNING facilitator.test refused [task_id=task-2]")


def test_chatty_libraries_log_from_warning_and_ours_at_the_level_set(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(LogSettings(log_level="INFO", _env_file=None))

    logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
    logging.getLogger("httpx").info("HTTP Request: GET http://127.0.0.1:4022/healthz")
    logging.getLogger("merchant.test").info("ours")
    logging.getLogger("httpx").warning("a library's warning")

    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 3)[3] for line in lines] == ["merchant.test ours", "httpx a library's warning"]


def test_at_debug_the_chatty_libraries_log_too(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LogSettings(log_level="DEBUG", _env_file=None))

    logging.getLogger("httpx").info("HTTP Request: GET http://127.0.0.1:4022/healthz")

    assert "HTTP Request" in capsys.readouterr().err


def test_an_error_level_keeps_the_chatty_libraries_warnings_out(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LogSettings(log_level="ERROR", _env_file=None))

    logging.getLogger("alembic").warning("not at ERROR")

    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("variable", "value"),
    [("X402_LOG_LEVEL", "LOUD"), ("X402_LOG_FORMAT", "xml"), ("X402_ACCESS_LOG", "maybe")],
)
def test_a_bad_log_setting_is_one_line_naming_its_variable(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)

    with pytest.raises(LogSettingsError) as refused:
        configure_logging()

    message = str(refused.value)
    assert variable in message and "\n" not in message


async def test_the_access_log_has_one_line_per_request_without_the_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def hello(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("hi", status_code=201)

    app = AccessLogMiddleware(Starlette(routes=[Route("/hello", hello, methods=["POST"])]))
    transport = httpx.ASGITransport(app=app)

    with caplog.at_level(logging.INFO, logger="x402.access"):
        async with httpx.AsyncClient(
            timeout=HANG_S, transport=transport, base_url="http://merchant"
        ) as client:
            await client.post("/hello?token=secret-value", content=b"body")
            await client.get("/missing")

    first, second = (r for r in caplog.records if r.name == "x402.access")
    assert (first.method, first.path, first.status) == ("POST", "/hello", 201)  # type: ignore[attr-defined]
    assert (second.path, second.status) == ("/missing", 404)  # type: ignore[attr-defined]
    assert "secret-value" not in caplog.text
