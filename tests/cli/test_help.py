"""No command's `--help` shows a secret, with every secret setting present in the environment (issue 14,
item 2): option defaults read from the environment (`x402-pay --key`, envvar `X402_PAYER_KEY`) included."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from a2a_x402.devchain.cli import main as devchain_main
from a2a_x402.facilitator.cli import main as facilitator_main
from a2a_x402.merchant.cli import main as merchant_main
from a2a_x402.payer.cli import main as payer_main
from tests.fixtures.commands import Secrets, assert_no_secret

COMMANDS: dict[str, click.Command] = {
    "x402-merchant": merchant_main,
    "x402-facilitator": facilitator_main,
    "x402-pay": payer_main,
    "x402-devchain": devchain_main,
}


def _paths(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _paths(sub, (*path, name))


def test_no_help_shows_a_secret(known_secrets: Secrets) -> None:
    env = {**known_secrets.env(), "X402_PAYER_KEY": known_secrets.relayer_key, "X402_TENANTS_FILE": "t.toml"}
    outputs = []
    for prog, command in COMMANDS.items():
        for path in _paths(command):
            answered = CliRunner().invoke(command, [*path, "--help"], prog_name=prog, env=env)
            assert answered.exit_code == 0, answered.output
            outputs.append(answered.output)

    assert len(outputs) > 20  # every subcommand of every command
    assert_no_secret(outputs, known_secrets.values())
