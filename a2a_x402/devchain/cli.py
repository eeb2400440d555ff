"""``x402-devchain``: run anvil with the dev token deployed until interrupted.

It mines a block every second by default (``--block-time``), as a real chain does; ``--block-time 0``
mines one block per transaction instead.

It listens on ``--port`` of 127.0.0.1, and remembers it beside the env file (``<env file>.port``) for later
runs; without it, on the port a chain on the same env file had: the port a file left behind by a killed
chain names, else the port the last ``--port`` chose, else the env file's home port (the same on every run,
from the file's absolute path), else, all taken, a free one (said in the start-up note). So a restarted
chain comes back where the settings other terminals took with ``--export`` point.

Prints the settings the other commands need as ``KEY=value`` lines and writes them to an env file (mode
0600, it holds dev keys). On SIGINT or SIGTERM it stops anvil, deletes anvil's state directory and removes
the env file, which would otherwise point at a chain that no longer exists (unless another run has written
it since), says so in one line and exits with status 0. While the chain an existing env file names still
answers it refuses to start (one line, exit status 2): a second chain would take that file from the first; a
stale file is replaced.

``x402-devchain --export`` starts nothing: it prints that env file of the dev chain already running here
as shell ``export`` lines, after checking that its node answers, so any other terminal takes the settings
with one line: ``eval "$(x402-devchain --export)"``.
"""

from __future__ import annotations

import shlex
import signal
import threading
from pathlib import Path

import click

from a2a_x402 import cli
from a2a_x402.observability import failure_reason

from ._anvil import DEFAULT_CHAIN_ID, AnvilNode, port_is_free
from ._deploy import DEFAULT_MINT_ATOMIC, deploy_devchain
from ._envfile import (
    home_port,
    live_node,
    loopback_port,
    probe,
    read_settings,
    remember_port,
    remembered_port,
    remove_if_unchanged,
    write_private,
)
from ._errors import AnvilNotFoundError, AnvilStartError

__all__ = ["main"]

# A block a second: the head never lags the wall clock by more, as on a real chain, and a settlement waits
# about that long for its receipt.
DEFAULT_BLOCK_TIME_S = 1
_DEFAULT_ENV_FILE = Path(".devchain.env")


def _export_command(env_file: Path) -> str:
    where = "" if env_file == _DEFAULT_ENV_FILE else f" --env-file {shlex.quote(str(env_file))}"
    return f"x402-devchain --export{where}"


def _export_lines(env_file: Path) -> str:
    """The settings in `env_file` as `export KEY=value` lines, once its node has answered.

    Raises:
        cli.ConfigError: no env file (no dev chain running here), or its node does not answer.
    """
    try:
        settings = read_settings(env_file)
    except FileNotFoundError:
        raise cli.ConfigError(
            f"no dev chain is running here: {env_file} does not exist; start `x402-devchain` first"
        ) from None
    rpc_url = settings.get("X402_RPC_URL")
    if rpc_url is None:
        raise cli.ConfigError(f"{env_file} names no X402_RPC_URL; restart `x402-devchain`")
    if (problem := probe(rpc_url)) is not None:
        raise cli.ConfigError(
            f"the dev chain of {env_file} does not answer at {rpc_url} ({failure_reason(problem)}): "
            "it has stopped; start `x402-devchain` again"
        ) from problem
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in settings.items())


def _refuse_if_running(env_file: Path, own_port: int | None = None) -> None:
    """Refuse to start while the chain `env_file` names answers: its file would be overwritten, then deleted.

    A file naming `own_port` is a stale one whose port this chain took again: what answers there is itself.

    Raises:
        cli.ConfigError: that chain is running.
    """
    rpc_url = live_node(env_file)
    if rpc_url is not None and (own_port is None or loopback_port(env_file) != own_port):
        raise cli.ConfigError(
            f"not starting: a dev chain is already running here at {rpc_url} "
            f"(its settings are in {env_file}); "
            f'use it (eval "$({_export_command(env_file)})"), stop it (Ctrl-C in its terminal), '
            "or start this one with another --env-file"
        )


def _choose_port(port: int | None, env_file: Path) -> tuple[int | None, int | None]:
    """(the port to listen on, None for a free one; a port preferred before it but taken, if any).

    Raises:
        cli.ConfigError: the `--port` asked for is taken.
    """
    if port is not None:
        if not port_is_free(port):
            raise cli.ConfigError(f"--port {port}: that port of 127.0.0.1 is taken; choose another")
        remember_port(env_file, port)
        return port, None
    taken: int | None = None
    for candidate in (loopback_port(env_file), remembered_port(env_file), home_port(env_file)):
        if candidate is None:
            continue
        if port_is_free(candidate):
            return candidate, taken
        taken = taken or candidate
    return None, taken


@click.command(cls=cli.Command, mistakes={AnvilNotFoundError: None, AnvilStartError: None})
@click.version_option(package_name="a2a-x402-merchant", prog_name="x402-devchain")
@click.option(
    "--chain-id", type=int, default=DEFAULT_CHAIN_ID, show_default=True, help="Chain id anvil reports."
)
@click.option(
    "--payers", type=click.IntRange(min=0), default=3, show_default=True, help="Fresh payer keys to fund."
)
@click.option(
    "--mint",
    "mint_atomic",
    type=click.IntRange(min=0),
    default=DEFAULT_MINT_ATOMIC,
    show_default=True,
    help="Tokens minted to each payer, in atomic units (6 decimals).",
)
@click.option(
    "--block-time",
    "block_time_s",
    type=click.IntRange(min=0),
    default=DEFAULT_BLOCK_TIME_S,
    show_default=True,
    envvar="X402_DEVCHAIN_BLOCK_TIME_S",
    help="Mine a block every this many seconds, like a real chain; 0 mines one per transaction (automine).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Listen on this port of 127.0.0.1, and again on later runs on the same --env-file. Default: the "
    "port the last --port chose, else the env file's own (the same on every run), or a free one if taken.",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=_DEFAULT_ENV_FILE,
    show_default=True,
    help="Where to write the settings; removed again on exit. Refused while the chain it names runs.",
)
@click.option(
    "--export",
    "export",
    is_flag=True,
    help="Start nothing: print the running dev chain's --env-file as shell export lines, for "
    '`eval "$(x402-devchain --export)"` in another terminal.',
)
def main(
    chain_id: int,
    payers: int,
    mint_atomic: int,
    block_time_s: int,
    port: int | None,
    env_file: Path,
    export: bool,
) -> None:
    """Start a local chain with the EIP-3009 dev token and funded payers; stop with Ctrl-C."""
    if export:
        click.echo(_export_lines(env_file), nl=False)
        return
    _refuse_if_running(env_file)  # before anything is started or written
    listen_port, taken = _choose_port(port, env_file)
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    # Installed before anvil starts, so a signal during start-up still leads to a clean shutdown.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    with AnvilNode(chain_id=chain_id, port=listen_port, die_with_parent=True) as node:
        chain = deploy_devchain(node.client, payers=payers, mint_atomic=mint_atomic)
        node.set_block_time(block_time_s)
        text = "".join(f"{key}={value}\n" for key, value in chain.env().items())
        # Again: another chain may have started while this one deployed.
        _refuse_if_running(env_file, own_port=node.port)
        write_private(env_file, text)
        try:
            click.echo(text, nl=False)
            moved = "" if taken is None else f" (port {taken} was taken: this chain is on {node.port})"
            click.echo(f"# settings written to {env_file}{moved}; press Ctrl-C to stop", err=True)
            while not stop.wait(0.5):
                if not node.running:
                    raise click.ClickException("anvil exited unexpectedly")
        finally:
            remove_if_unchanged(env_file, text)
    if received:  # a stop asked for: said once, after anvil and its state are gone
        click.echo(f"x402-devchain stopped by {received[0]}: the chain and its state were deleted", err=True)
