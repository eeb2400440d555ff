"""Log setup of the services: one configuration for the merchant's and the facilitator's CLIs.

`configure_logging` installs one handler on the root logger, in text or JSON (one object a line: `time` in
UTC ISO 8601, `level`, `logger`, `message`, then every field that a `log_context` around the call or the
call's own `extra=` gave, such as `task_id`, `tenant`, `outcome`). Libraries only log; they never configure.
Nothing secret is passed to a log call of ours; dependencies are another matter (at DEBUG, SQLAlchemy's
and aiosqlite's SQL parameters hold webhook secrets, the a2a-sdk's request bodies and events hold payment
signatures), so: those loggers never go below their `_QUIET_LOGGERS` level, whatever `X402_LOG_LEVEL`
says, and every line written, ours or theirs, passes `redact` (registered secrets and secret shapes).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ._redact import redact

__all__ = [
    "LogSettings",
    "LogSettingsError",
    "configure_logging",
    "configure_tool_logging",
    "log_context",
]

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_CONTEXT: ContextVar[dict[str, Any] | None] = ContextVar("x402_log_context", default=None)
# Attributes every LogRecord has; anything else on a record came from `extra=` or the context.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# Libraries whose INFO lines are noise to an operator: alembic's "Context impl SQLiteImpl" at every start,
# httpx's "HTTP Request: GET …/healthz" at every /readyz probe. They log from WARNING, or everything at DEBUG.
_CHATTY_LOGGERS = ("alembic", "httpx")
# Dependencies whose lower levels write what must never be written: SQL with its parameters (SQLAlchemy's
# engine at INFO; aiosqlite, asyncpg at DEBUG), request bodies and events with payment signatures (the
# a2a-sdk at DEBUG), HTTP/2 and HTTP/1.1 frames and headers (hpack, h2, httpcore, grpc), form parts
# (python-multipart), the disclosed claims of AP2 mandates (sd_jwt at DEBUG). They log from this level up
# even at DEBUG; there is no setting to lower it.
_QUIET_LOGGERS = {
    "sqlalchemy": logging.WARNING,
    "aiosqlite": logging.INFO,
    "asyncpg": logging.INFO,
    "a2a": logging.INFO,
    "httpcore": logging.INFO,
    "hpack": logging.INFO,
    "h2": logging.INFO,
    "grpc": logging.INFO,
    "multipart": logging.INFO,
    "python_multipart": logging.INFO,
    "sd_jwt": logging.INFO,
    "sse_starlette": logging.INFO,
    "websockets": logging.INFO,
    "web3": logging.INFO,
    "urllib3": logging.INFO,
    "asyncio": logging.INFO,
}


class LogSettingsError(ValueError):
    """A log setting has a value the services cannot use; the message names the variable."""


class LogSettings(BaseSettings):
    """`X402_LOG_LEVEL`, `X402_LOG_FORMAT` and `X402_ACCESS_LOG`."""

    model_config = SettingsConfigDict(env_prefix="X402_", env_file=".env", extra="ignore")

    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING, ERROR or CRITICAL")
    log_format: Literal["text", "json"] = Field("text", description="text lines, or one JSON object a line")
    access_log: bool = Field(False, description="log every HTTP request (method, path, status, duration)")

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in _LEVELS:
            raise ValueError(f"must be one of {', '.join(_LEVELS)}")
        return level


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add `fields` (those not None) to every log record made inside the block, in this task."""
    current = _CONTEXT.get() or {}
    token = _CONTEXT.set(current | {k: v for k, v in fields.items() if v is not None})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class _ContextFilter(logging.Filter):
    """Copies the `log_context` fields onto each record (an `extra=` of the call itself wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_CONTEXT.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS and not k.startswith("_")}


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(self._line(record))

    def _line(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(_fields(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(self._line(record))

    def _line(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = _fields(record)
        if not fields:
            return text
        head, newline, rest = text.partition("\n")  # the fields go on the message line, before a traceback
        suffix = " ".join(f"{key}={value}" for key, value in fields.items())
        return f"{head} [{suffix}]{newline}{rest}"


def configure_logging(settings: LogSettings | None = None) -> LogSettings:
    """Send every log record to stderr at `X402_LOG_LEVEL`, formatted as `X402_LOG_FORMAT` says.

    Raises:
        LogSettingsError: a log setting is invalid (one line naming the variable).
    """
    if settings is None:
        settings = _load_settings()
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_ContextFilter())
    if settings.log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        formatter = _TextFormatter(_TEXT_FORMAT)
        formatter.converter = _utc_time_tuple
        handler.setFormatter(formatter)
    _install(handler, settings.log_level)
    return settings


def configure_tool_logging(default_level: int) -> None:
    """Logging of a command-line tool (`x402-pay`): `LEVEL message` lines on stderr at `X402_LOG_LEVEL`
    when it is set, else at `default_level`; every line through `redact` and the dependencies kept above
    the levels that write bodies and SQL, as the services' (register the tool's secrets with
    `redact_values`).

    Raises:
        LogSettingsError: `X402_LOG_LEVEL` is invalid (one line naming it).
    """
    settings = _load_settings()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(levelname)s %(message)s"))
    _install(handler, settings.log_level if "log_level" in settings.model_fields_set else default_level)


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def _load_settings() -> LogSettings:
    try:
        return LogSettings()
    except ValidationError as exc:
        problems = "; ".join(
            f"X402_{'_'.join(str(p) for p in error['loc']).upper()}: "
            + str(error["msg"]).removeprefix("Value error, ")
            for error in exc.errors(include_input=False)
        )
        raise LogSettingsError(f"invalid settings: {problems}") from None


def _install(handler: logging.Handler, level: int | str) -> None:
    """`handler` as the root logger's only one, at `level`; the chatty and quiet dependencies set."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    chatty_level = logging.DEBUG if root.level == logging.DEBUG else max(logging.WARNING, root.level)
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(chatty_level)
    for name, floor in _QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(max(floor, root.level))


def _utc_time_tuple(seconds: float | None) -> Any:
    return datetime.fromtimestamp(seconds or 0, UTC).timetuple()
