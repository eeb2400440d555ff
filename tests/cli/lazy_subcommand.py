"""A subcommand `tests/cli/test_lazy.py` names lazily: a group with a mistake of its own."""

from __future__ import annotations

import click

from a2a_x402 import cli


class LaterRefused(Exception):
    """The mistake only this subcommand lists."""


@click.group(cls=cli.Group, mistakes={LaterRefused: "X402_LATER"})
def later() -> None:
    """Loaded when the command line reaches it."""


@later.command()
def refuse() -> None:
    """Refuse, as a mistake of the subcommand's own."""
    raise LaterRefused("is refused")
