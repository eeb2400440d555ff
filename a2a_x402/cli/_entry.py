"""The one place a command answers: a click `Group` or `Command` whose `main` turns every mistake into one
line on stderr (exit status 2) and every other failure into a logged traceback and one line (exit 1)."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections import ChainMap
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, NoReturn

import click
from pydantic import ValidationError

from ._errors import MISTAKE_EXIT_CODE, ConfigError
from ._settings import settings_class, settings_problems

__all__ = ["Command", "Group", "Mistakes", "answer"]

Mistakes = Mapping[type[Exception], str | None]
"""Exception types a command answers as mistakes of its user, each with the variable (or file) that leads its
line, or None when the exception's message names it already."""

_UNEXPECTED_EXIT_CODE = 1


def _one_line(message: str) -> str:
    """`message` on one line: a list under a heading (`a:\\n  - b\\n  - c`) becomes `a: b; c`."""
    lines = [line.strip().removeprefix("- ") for line in message.splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    return f"{lines[0]} {'; '.join(lines[1:])}"


def _fail(line: str, code: int) -> NoReturn:
    click.echo(_one_line(line), err=True)
    sys.exit(code)


def answer(run: Callable[[], Any], *, prog: str, mistakes: Mistakes) -> NoReturn:
    """Run `run` (a click command in non-standalone mode) and exit with its status, answering failures.

    Mistakes (usage errors, `ConfigError`, settings validation, the types in `mistakes`) are one line and
    exit status 2; other click exceptions keep their own status; anything else logs its traceback and exits 1.
    """
    try:
        result = run()
    except click.UsageError as exc:
        path = exc.ctx.command_path if exc.ctx is not None else prog
        _fail(f"{path}: {exc.format_message()} (see {path} --help)", MISTAKE_EXIT_CODE)
    except click.Abort:
        _fail("Aborted!", _UNEXPECTED_EXIT_CODE)
    except click.ClickException as exc:  # a command's own refusal, in click's words ("Error: ...")
        _fail(f"Error: {exc.format_message()}", exc.exit_code)
    except ConfigError as exc:
        _fail(f"{prog}: {exc}", MISTAKE_EXIT_CODE)
    except ValidationError as exc:
        if settings_class(exc) is None:
            _unexpected(exc, prog)
        _fail(f"{prog}: {settings_problems(exc)}", MISTAKE_EXIT_CODE)
    except Exception as exc:
        variable = next((mistakes[cls] for cls in type(exc).__mro__ if cls in mistakes), ...)
        if variable is ...:
            _unexpected(exc, prog)
        _fail(f"{prog}: {variable}: {exc}" if variable else f"{prog}: {exc}", MISTAKE_EXIT_CODE)
    sys.exit(result if isinstance(result, int) else 0)


def _unexpected(exc: BaseException, prog: str) -> NoReturn:
    # A bug or an outage, not the user's mistake: the traceback is for the log, the answer is one line.
    logging.getLogger(prog).error("%s failed unexpectedly", prog, exc_info=exc)
    _fail(
        f"{prog}: unexpected error ({type(exc).__name__}); the traceback is in the log", _UNEXPECTED_EXIT_CODE
    )


class _Answering:
    """Mixed into a click command: `main` answers through `answer` with the command's `mistakes`."""

    mistakes: MutableMapping[type[Exception], str | None]

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        command_main = super().main  # type: ignore[misc]
        if not standalone_mode:
            return command_main(args, prog_name, complete_var, False, **extra)
        prog = prog_name or os.path.basename(sys.argv[0]) or "x402"
        answer(
            lambda: command_main(args, prog, complete_var, False, **extra), prog=prog, mistakes=self.mistakes
        )


class Group(_Answering, click.Group):
    """A click group answering as `answer` does, for its mistakes (`mistakes`) and those of each subcommand
    it holds that lists some: a lazy subcommand's join when it is loaded, which is before it can run.

    `lazy` names subcommands loaded only when the command line reaches them (or help lists them), each as
    `"module:attribute"` (click's lazy group pattern): a command imports what it uses, not its siblings.
    """

    mistakes: ChainMap[type[Exception], str | None]

    def __init__(
        self,
        *args: Any,
        mistakes: Mistakes | None = None,
        lazy: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        # Read when a failure is answered: the maps of subcommands added (or loaded) later are in it then.
        self.mistakes = ChainMap(dict(mistakes or {}))
        super().__init__(*args, **kwargs)
        for command in self.commands.values():
            self._join_mistakes(command)
        self.lazy = dict(lazy or {})

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(cmd, name)
        self._join_mistakes(cmd)

    def _join_mistakes(self, command: click.Command) -> None:
        if isinstance(command, _Answering):
            self.mistakes.maps.append(command.mistakes)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attribute = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


class Command(_Answering, click.Command):
    """A click command answering as `answer` does; `mistakes` as there."""

    def __init__(self, *args: Any, mistakes: Mistakes | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mistakes = dict(mistakes or {})
