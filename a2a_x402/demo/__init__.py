"""`x402-demo`: the whole product on one machine, end to end, on embedded defaults.

It starts a local dev chain (anvil + the DevUSDC token, `devchain`), runs the reference merchant
(`x402-merchant serve`: SQLite, in-process facilitator, its Agent Card signed with a fresh ES256 key) on
loopback, pays for one task with `x402-pay` (which refuses to pay unless the card's signature verifies),
and prints the tenant's ledger line for that payment. Everything it starts is stopped and deleted at exit,
also on Ctrl-C or SIGTERM, which are said in one line (exit status 0: a stop the user asked for).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx
from eth_account import Account

from a2a_x402 import cli
from a2a_x402.agentcard import KeyStore
from a2a_x402.devchain import AnvilNotFoundError, AnvilStartError, DevChain, start_devchain
from a2a_x402.merchant.ledger import LedgerReader
from a2a_x402.storage import create_engine, upgrade_schema

__all__ = ["main"]

# anvil's well-known account 9 receives the demo's payments.
PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"
PRICE_ATOMIC = 250_000  # 0.25 USDC
REQUEST = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs off into the woods."


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Only a merchant that hangs takes this long: one that fails exits, and is reported at once. A busy or
# slow machine (a laptop running other work, a CI runner) can take many times its quiet startup.
_STARTUP_TIMEOUT_S = 120.0
# SIGTERM lets the merchant finish its requests and release its relayer leases; one that outlasts this is
# killed, so the demo never leaves it running.
_STOP_TIMEOUT_S = 60.0


def _wait_healthy(
    url: str, process: subprocess.Popen[bytes], log_path: Path, timeout_s: float = _STARTUP_TIMEOUT_S
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            click.echo(log_path.read_text(errors="replace"), err=True)
            raise click.ClickException("the merchant exited during startup (its log is above)")
        try:
            if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    click.echo(log_path.read_text(errors="replace"), err=True)
    raise click.ClickException(f"the merchant did not start within {timeout_s:.0f} s (its log is above)")


T = TypeVar("T")


class _Stopped(Exception):
    """A signal asked the demo to stop: raised where it runs, so every `finally` stops what it started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)


def _stop_on_signals() -> None:
    def stop(signum: int, _frame: object) -> None:
        # Once: a second signal while the first is being handled must not cut the clean-up short.
        for each in (signal.SIGINT, signal.SIGTERM):
            signal.signal(each, signal.SIG_IGN)
        raise _Stopped(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)


def _run_unstopped(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run` of a short coroutine with SIGINT and SIGTERM held until it returns.

    A stop raised inside `asyncio.run` while it makes or closes its loop leaves a half-made loop and a
    coroutine never awaited, whose warnings would follow the demo's one line; held, it lands just after.
    """
    signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        return asyncio.run(main())
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)


async def _ledger_lines(database_url: str) -> list[str]:
    engine = create_engine(database_url)
    try:
        lines = await LedgerReader(engine).statement("")
    finally:
        await engine.dispose()
    return [
        f"  #{line.sequence} {line.booked_at:%Y-%m-%d %H:%M:%S} {line.direction} {line.amount} atomic units"
        f" ({line.status}), task {line.task_id}, payer {line.payer}, tx {line.tx_hash},"
        f" block {line.block_number}"
        for line in lines
    ]


def _merchant_env(chain: DevChain, database_url: str, port: int, keys_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "X402_DATABASE_URL": database_url,
        "X402_RPC_URL": chain.rpc_url,
        "X402_NETWORK": chain.network,
        "X402_ASSET": chain.asset,
        "X402_ASSET_NAME": chain.asset_name,
        "X402_ASSET_VERSION": chain.asset_version,
        "X402_RELAYER_KEY": chain.relayer_key,
        "X402_PAY_TO": PAY_TO,
        "X402_PRICE": str(PRICE_ATOMIC),
        "X402_HOST": "127.0.0.1",
        "X402_PORT": str(port),
        "X402_CARD_KEYS_DIR": str(keys_dir),
    }


@click.command(cls=cli.Command, mistakes={AnvilNotFoundError: None, AnvilStartError: None})
@click.version_option(package_name="a2a-x402-merchant", prog_name="x402-demo")
@click.option("--stream/--no-stream", default=True, help="pay over SendStreamingMessage (shows every stage)")
@click.argument("text", default=REQUEST)
def main(stream: bool, text: str) -> None:
    """Run the dev chain, the merchant and a paying client; print the stages, the tx and the ledger line."""
    _stop_on_signals()
    try:
        _run(stream, text)
    except _Stopped as stopped:
        click.echo(f"x402-demo stopped by {stopped}: the chain and merchant it started are gone", err=True)


def _run(stream: bool, text: str) -> None:
    with start_devchain(payers=1) as chain, tempfile.TemporaryDirectory(prefix="x402-demo-") as workdir:
        click.echo(f"dev chain: {chain.rpc_url} ({chain.network}), token {chain.asset}")
        database_url = f"sqlite+aiosqlite:///{workdir}/x402.db"
        _run_unstopped(partial(upgrade_schema, database_url))
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        log_path = Path(workdir) / "merchant.log"
        keys_dir = Path(workdir) / "card-keys"
        key = KeyStore(keys_dir).generate("ES256")
        click.echo(f"card signing key: {key.alg} {key.kid} (in {keys_dir})")
        with log_path.open("wb") as log:
            # Our own console script with arguments we chose: nothing untrusted reaches the command line.
            merchant = subprocess.Popen(  # noqa: S603
                [_bin("x402-merchant"), "serve"],
                env=_merchant_env(chain, database_url, port, keys_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_healthy(base_url, merchant, log_path)
            click.echo(
                f"merchant: {base_url} (SQLite, in-process facilitator), price {PRICE_ATOMIC} atomic units"
            )
            click.echo(f"payer balance before: {chain.balance_of(_payer_address(chain))} atomic units\n")
            # The card's JWK Set is on the merchant's plain-http loopback origin: allowed in the demo only.
            command = [
                _bin("x402-pay"),
                "--card-url",
                base_url,
                "--card-policy",
                "require",
                "--allow-insecure-jku",
                *(["--stream"] if stream else []),
                text,
            ]
            paid = subprocess.run(  # noqa: S603 - as above
                command, env={**os.environ, "X402_PAYER_KEY": chain.payer_keys[0]}, check=False
            )
            if paid.returncode != 0:
                click.echo(log_path.read_text(errors="replace"), err=True)
                raise click.ClickException("the payment did not complete (merchant log above)")
            payer_after = chain.balance_of(_payer_address(chain))
            click.echo(f"\npayer balance after: {payer_after}; payee {PAY_TO}: {chain.balance_of(PAY_TO)}")
            click.echo("ledger (default tenant):")
            for line in _run_unstopped(partial(_ledger_lines, database_url)):
                click.echo(line)
        finally:
            _stop(merchant)


def _stop(merchant: subprocess.Popen[bytes]) -> None:
    merchant.terminate()
    try:
        merchant.wait(_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        merchant.kill()
        merchant.wait()


def _payer_address(chain: DevChain) -> str:
    return str(Account.from_key(chain.payer_keys[0]).address)
