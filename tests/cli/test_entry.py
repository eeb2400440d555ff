"""The one place a command answers (`cli.Group` / `cli.Command`): mistakes in one line with exit status 2,
settings errors by variable without values, other failures logged with their traceback and answered in one
line with exit status 1."""

from __future__ import annotations

import logging

import click
import pytest
from click.testing import CliRunner
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from a2a_x402 import cli

SECRET = "0x" + "5e" * 32


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="X402_", extra="ignore")

    asset: str = Field(..., description="the token contract's address")
    relayer_key: SecretStr | None = None
    port: int = Field(8000, le=65535)
    price: int = 10_000
    grpc_port: int | None = None


class _Refused(Exception):
    pass


@click.group(cls=cli.Group, mistakes={_Refused: "X402_SOMETHING"})
def _main() -> None:
    pass


@_main.command()
def settings() -> None:
    _Settings()


@_main.command()
def config() -> None:
    raise cli.ConfigError("is not set: set it to the directory of the keys", variable="X402_CARD_KEYS_DIR")


@_main.command()
def listed() -> None:
    raise _Refused("has 2 problems:\n  - one\n  - two")


@_main.command()
def bug() -> None:
    raise RuntimeError(f"internal state {SECRET}")


def test_a_settings_error_names_the_variables_and_no_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X402_ASSET", raising=False)
    monkeypatch.setenv("X402_RELAYER_KEY", SECRET)
    monkeypatch.setenv("X402_PORT", "99999")

    answered = CliRunner().invoke(_main, ["settings"], prog_name="x402-test")

    assert answered.exit_code == 2
    assert answered.output == (
        "x402-test: X402_ASSET is not set (the token contract's address): set it in the environment or .env; "
        "X402_PORT: must be at most 65535, got '99999'\n"
    )
    assert "5e5e5e5e" not in answered.output


def test_a_value_is_shown_unless_it_could_be_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X402_ASSET", "0x" + "11" * 20)
    monkeypatch.setenv("X402_PRICE", "abc")
    monkeypatch.setenv("X402_GRPC_PORT", SECRET)  # a key pasted into the wrong variable

    answered = CliRunner().invoke(_main, ["settings"], prog_name="x402-test")

    assert answered.exit_code == 2
    assert answered.output == (
        "x402-test: X402_PRICE: must be an integer, got 'abc'; X402_GRPC_PORT: must be an integer\n"
    )


def test_a_config_error_is_one_line_led_by_its_variable() -> None:
    answered = CliRunner().invoke(_main, ["config"], prog_name="x402-test")

    assert (answered.exit_code, answered.output) == (
        2,
        "x402-test: X402_CARD_KEYS_DIR is not set: set it to the directory of the keys\n",
    )


def test_a_listed_mistake_is_one_line_with_its_variable() -> None:
    answered = CliRunner().invoke(_main, ["listed"], prog_name="x402-test")

    assert (answered.exit_code, answered.output) == (
        2,
        "x402-test: X402_SOMETHING: has 2 problems: one; two\n",
    )


def test_a_usage_error_is_one_line() -> None:
    answered = CliRunner().invoke(_main, ["nosuch"], prog_name="x402-test")

    assert (answered.exit_code, answered.output) == (
        2,
        "x402-test: No such command 'nosuch'. (see x402-test --help)\n",
    )


@pytest.mark.error_logs("why: the command raises a bug of its own, which is logged with its traceback")
def test_an_unexpected_failure_logs_its_traceback_and_answers_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="x402-test"):
        answered = CliRunner().invoke(_main, ["bug"], prog_name="x402-test")

    assert (answered.exit_code, answered.output) == (
        1,
        "x402-test: unexpected error (RuntimeError); the traceback is in the log\n",
    )
    [record] = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
