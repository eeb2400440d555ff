"""``x402-devchain``: run anvil with the dev token deployed until interrupted.

It mines a block every second by default (``--block-time``), as a real chain does; ``--block-time 0``
mines one block per transaction instead.

Prints the settings the other commands need as ``KEY=value`` lines and writes them to an env
file (mode 0600, it holds dev keys). On SIGINT or SIGTERM it stops anvil, deletes anvil's state
directory and removes the env file, which would otherwise point at a chain that no longer exists.

``x402-devchain --export`` starts nothing: it prints that env file of the dev chain already running here
as shell ``export`` lines, after checking that its node answers, so any other terminal takes the settings
with one line: ``eval "$(x402-devchain --export)"``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import threading
from pathlib import Path

import click
import httpx

import cli

from ._anvil import DEFAULT_CHAIN_ID, AnvilNode
from ._deploy import DEFAULT_MINT_ATOMIC, deploy_devchain
from ._errors import AnvilNotFoundError, AnvilStartError, RpcError
from ._rpc import RpcClient

__all__ = ["main"]

# A block a second: the head never lags the wall clock by more, as on a real chain, and a settlement waits
# about that long for its receipt.
DEFAULT_BLOCK_TIME_S = 1
_EXPORT_PROBE_TIMEOUT_S = 3.0
_ENV_LINE = re.compile(r"^(X402_[A-Z0-9_]+)=(.*)$")


def _write_private(path: Path, text: str) -> None:
    # Write then rename, so a reader polling for the file never sees half of it.
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(partial, path)


def _export_lines(env_file: Path) -> str:
    """The settings in `env_file` as `export KEY=value` lines, once its node has answered.

    Raises:
        click.ClickException: no env file (no dev chain running here), or its node does not answer.
    """
    try:
        text = env_file.read_text()
    except FileNotFoundError:
        raise click.ClickException(
            f"no dev chain is running here: {env_file} does not exist; start `x402-devchain` first"
        ) from None
    settings: dict[str, str] = {
        match[1]: match[2] for line in text.splitlines() if (match := _ENV_LINE.match(line))
    }
    rpc_url = settings.get("X402_RPC_URL")
    if rpc_url is None:
        raise click.ClickException(f"{env_file} names no X402_RPC_URL; restart `x402-devchain`")
    try:
        with RpcClient(rpc_url, timeout_s=_EXPORT_PROBE_TIMEOUT_S) as rpc:
            rpc.call("eth_chainId")
    except (httpx.HTTPError, RpcError) as exc:
        raise click.ClickException(
            f"the dev chain of {env_file} does not answer at {rpc_url} ({type(exc).__name__}): "
            "it has stopped; start `x402-devchain` again"
        ) from exc
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in settings.items())


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
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path(".devchain.env"),
    show_default=True,
    help="Where to write the settings; removed again on exit.",
)
@click.option(
    "--export",
    "export",
    is_flag=True,
    help="Start nothing: print the running dev chain's --env-file as shell export lines, for "
    '`eval "$(x402-devchain --export)"` in another terminal.',
)
def main(
    chain_id: int, payers: int, mint_atomic: int, block_time_s: int, env_file: Path, export: bool
) -> None:
    """Start a local chain with the EIP-3009 dev token and funded payers; stop with Ctrl-C."""
    if export:
        click.echo(_export_lines(env_file), nl=False)
        return
    stop = threading.Event()
    # Installed before anvil starts, so a signal during start-up still leads to a clean shutdown.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with AnvilNode(chain_id=chain_id) as node:
        chain = deploy_devchain(node.client, payers=payers, mint_atomic=mint_atomic)
        node.set_block_time(block_time_s)
        text = "".join(f"{key}={value}\n" for key, value in chain.env().items())
        _write_private(env_file, text)
        try:
            click.echo(text, nl=False)
            click.echo(f"# settings written to {env_file}; press Ctrl-C to stop", err=True)
            while not stop.wait(0.5):
                if not node.running:
                    raise click.ClickException("anvil exited unexpectedly")
        finally:
            env_file.unlink(missing_ok=True)
