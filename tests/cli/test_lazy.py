"""`cli.Group(lazy=...)`: a subcommand named by `module:attribute` is imported only when the command line
reaches it (or help lists it), and the mistakes it lists are answered in one line like the group's own."""

from __future__ import annotations

import sys

import click
import pytest
from click.testing import CliRunner

from a2a_x402 import cli

_MODULE = "tests.cli.lazy_subcommand"


class _OwnRefused(Exception):
    pass


def _group() -> cli.Group:
    @click.group(cls=cli.Group, mistakes={_OwnRefused: "X402_OWN"}, lazy={"later": f"{_MODULE}:later"})
    def main() -> None:
        pass

    @main.command()
    def own() -> None:
        raise _OwnRefused("is refused")

    assert isinstance(main, cli.Group)
    return main


@pytest.fixture(autouse=True)
def _unloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, _MODULE, raising=False)


def test_a_lazy_subcommand_is_not_imported_by_a_sibling() -> None:
    answered = CliRunner().invoke(_group(), ["own"], prog_name="x402-test")

    assert (answered.exit_code, answered.output) == (2, "x402-test: X402_OWN: is refused\n")
    assert _MODULE not in sys.modules


def test_a_lazy_subcommands_own_mistake_is_one_line_with_its_variable() -> None:
    answered = CliRunner().invoke(_group(), ["later", "refuse"], prog_name="x402-test")

    assert (answered.exit_code, answered.output) == (2, "x402-test: X402_LATER: is refused\n")


def test_help_lists_lazy_subcommands_among_the_others_in_order() -> None:
    answered = CliRunner().invoke(_group(), ["--help"], prog_name="x402-test")

    assert answered.exit_code == 0
    commands = answered.output.split("Commands:\n")[1].split()
    assert commands[0] == "later" and "Loaded when the command line reaches it." in answered.output
    assert commands.index("later") < commands.index("own")


@pytest.mark.error_logs("why: a lazy name that is no command is a bug of ours, logged as one")
def test_a_lazy_name_that_is_no_command_is_a_bug_not_a_mistake() -> None:
    broken = cli.Group("main", lazy={"later": f"{_MODULE}:LaterRefused"})

    answered = CliRunner().invoke(broken, ["later"], prog_name="x402-test")

    assert answered.exit_code == 1
    assert answered.output == "x402-test: unexpected error (TypeError); the traceback is in the log\n"
