"""Reference merchants as real operating-system processes: `x402-merchant serve`, SIGKILL, restart, reconcile.

Each merchant is configured only through the `X402_*` environment, as an operator would run it: the
`chain` fixture's node (or a proxy in front of it), its token, a relayer key, an API token for the default
tenant made at run time and a PostgreSQL database. The process inherits no `X402_*` variable from the test
run and runs in its own directory (no stray `.env`). Its log goes to a file, shown when it fails to start,
checked for ERROR lines with the test's own records (`tests/fixtures/error_logs.py`).
Every process started is killed at teardown; then, for a scenario that passed, no log and no `reconcile`
output may hold an 8-character piece of the relayer key, the API token or a secret a client presented (the
signatures of AP2 mandates; issue 14, item 2: every fault scenario checks this as it runs, at no extra
cost).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from a2a.extensions.common import HTTP_EXTENSION_HEADER
from a2a.utils.constants import VERSION_HEADER

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from tests.fixtures import forked
from tests.fixtures.commands import assert_no_secret
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.error_logs import watch_log
from tests.fixtures.forked import ForkedProcess
from tests.fixtures.merchant import DEFAULT_PAY_TO, DEFAULT_PRICE, chain_settings
from tests.fixtures.servers import free_port, wait_answering

__all__ = ["SERVE", "MerchantProcess", "MerchantProcesses", "ReconcileRun", "merchant_processes"]

_STOP_TIMEOUT_S = 30.0
_RECONCILE_TIMEOUT_S = 60.0
_CLIENT_TIMEOUT_S = 30.0
_LOG_TAIL_LINES = 40
_RELAYER_LEASE_S = 2.0


def _console_script(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


SERVE = (_console_script("x402-merchant"), "serve")
"""The command line of a reference merchant."""


@dataclass
class MerchantProcess:
    """One `x402-merchant serve` process (or the memory of one that was killed)."""

    name: str
    base_url: str
    env: dict[str, str]
    log_path: Path
    command: tuple[str, ...] = SERVE
    """The command line serving it."""
    process: ForkedProcess | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        """Whether the process is running."""
        return self.process is not None and self.process.poll() is None

    def http(self, *, connections: int = 100, timeout_s: float = _CLIENT_TIMEOUT_S) -> httpx.AsyncClient:
        """An A2A 1.0 client of this merchant with the x402 extension activated."""
        headers = {VERSION_HEADER: "1.0", HTTP_EXTENSION_HEADER: EXTENSION_URI}
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout_s,
            # Idle connections expire before uvicorn's 5 s keep-alive closes them: reusing one the server
            # is closing that moment fails the request with a ReadError that is nobody's fault.
            limits=httpx.Limits(
                max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=2.0
            ),
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, connections and transactions are cut where they stand."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(_STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM and wait for a clean shutdown (SIGKILL if it does not come)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self) -> str:
        """The last lines of the process's log."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:])


@dataclass(frozen=True)
class ReconcileRun:
    """What one `x402-merchant reconcile` run printed, and its exit status."""

    returncode: int
    stdout: str
    stderr: str


class MerchantProcesses:
    """Starts merchants on one chain and one database; `close()` kills every one still running."""

    def __init__(self, chain: DevChain, database_url: str, workdir: Path) -> None:
        self._chain = chain
        self._database_url = database_url
        self._workdir = workdir
        self._started: list[MerchantProcess] = []
        self._api_token = secrets.token_urlsafe(32)
        self._outputs: list[str] = []
        self._client_secrets: dict[str, str] = {}

    def keep_secret(self, name: str, value: str) -> None:
        """A secret a client gave the merchants (a mandate's signature): no log or output may hold a piece
        of it either."""
        self._client_secrets[name] = value

    def env(
        self, *, port: int, rpc_url: str | None = None, relayer_key: str | None = None, **settings: object
    ) -> dict[str, str]:
        """The environment of a merchant; `settings` are `MerchantSettings`/`FacilitatorSettings` fields."""
        chain = self._chain
        values: dict[str, object] = {
            **chain_settings(chain),
            "database_url": self._database_url,
            "rpc_url": rpc_url or chain.rpc_url,
            "relayer_key": relayer_key or chain.relayer_key,
            "pay_to": DEFAULT_PAY_TO,
            "price": DEFAULT_PRICE,
            "api_token": self._api_token,
            "host": "127.0.0.1",
            "port": port,
            # A restart after SIGKILL takes the relayer key over once the killed process's lease runs out.
            "relayer_lease_s": _RELAYER_LEASE_S,
            **settings,
        }
        env = {key: value for key, value in os.environ.items() if not key.startswith("X402_")}
        env.update({f"X402_{name.upper()}": str(value) for name, value in values.items()})
        return env

    async def start(
        self,
        *,
        rpc_url: str | None = None,
        relayer_key: str | None = None,
        command: tuple[str, ...] = SERVE,
        **settings: object,
    ) -> MerchantProcess:
        """Start a merchant and return once it answers `/healthz`; `command` serves it instead of
        `x402-merchant serve` (configured by the same environment).

        Raises:
            AssertionError: it exited or did not answer in time (its log tail is in the message).
        """
        port = free_port()
        env = self.env(port=port, rpc_url=rpc_url, relayer_key=relayer_key, **settings)
        merchant = MerchantProcess(
            name=f"merchant-{len(self._started) + 1}",
            base_url=f"http://127.0.0.1:{port}",
            env=env,
            log_path=self._workdir / f"merchant-{len(self._started) + 1}.log",
            command=command,
        )
        return await self._launch(merchant)

    async def restart(self, merchant: MerchantProcess, **settings: object) -> MerchantProcess:
        """Start `merchant` again (same command, port, database, chain and keys), with `settings` changed."""
        if merchant.alive:
            raise RuntimeError(f"{merchant.name} is still running")
        env = {**merchant.env, **{f"X402_{name.upper()}": str(value) for name, value in settings.items()}}
        again = MerchantProcess(
            name=f"{merchant.name}-restarted",
            base_url=merchant.base_url,
            env=env,
            log_path=self._workdir / f"{merchant.name}-restarted-{len(self._started)}.log",
            command=merchant.command,
        )
        return await self._launch(again)

    async def reconcile(self, merchant: MerchantProcess, **settings: object) -> ReconcileRun:
        """One `x402-merchant reconcile` pass with `merchant`'s settings (and `settings` changed)."""
        env = {**merchant.env, **{f"X402_{name.upper()}": str(value) for name, value in settings.items()}}
        code, stdout, stderr = await forked.run(
            [_console_script("x402-merchant"), "reconcile"],
            env=env,
            cwd=self._workdir,
            timeout_s=_RECONCILE_TIMEOUT_S,
            stop_timeout_s=_STOP_TIMEOUT_S,
        )
        run = ReconcileRun(code, stdout.decode(), stderr.decode())
        self._outputs += [run.stdout, run.stderr]
        return run

    def close(self) -> None:
        """Kill every merchant still running."""
        for merchant in self._started:
            merchant.kill()

    def assert_no_secret_printed(self) -> None:
        """No merchant's log and no reconcile output holds a piece of a secret the merchants were given."""
        logs = [
            merchant.log_path.read_text(errors="replace")
            for merchant in self._started
            if merchant.log_path.exists()
        ]
        known = {"API token": self._api_token, **self._client_secrets}
        for merchant in self._started:
            known[f"relayer key of {merchant.name}"] = merchant.env["X402_RELAYER_KEY"].removeprefix("0x")
        assert_no_secret([*logs, *self._outputs], known)

    async def _launch(self, merchant: MerchantProcess) -> MerchantProcess:
        self._spawn(merchant)
        await _wait_healthy(merchant)
        return merchant

    def _spawn(self, merchant: MerchantProcess) -> None:
        # fork/exec returns at once; the wait for the server to come up is the async part.
        with merchant.log_path.open("ab") as log:
            merchant.process = forked.spawn(
                list(merchant.command),
                env=merchant.env,
                cwd=self._workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._started.append(merchant)
        watch_log(merchant.log_path)


@contextmanager
def merchant_processes(chain: DevChain, database_url: str, workdir: Path) -> Iterator[MerchantProcesses]:
    """`MerchantProcesses` on `chain` and `database_url`, every merchant killed on the way out."""
    # The rollback of `chain` rewinds the node's clock; payers sign against the wall clock.
    chain.rpc.call("evm_setTime", [int(time.time())])
    processes = MerchantProcesses(chain, database_url, workdir)
    try:
        yield processes
    finally:
        processes.close()
    processes.assert_no_secret_printed()  # only after a block that passed: a failure keeps its own message


async def _wait_healthy(merchant: MerchantProcess) -> None:
    try:
        await wait_answering(
            merchant.base_url + "/healthz",
            running=lambda: merchant.alive,
            what=merchant.name,
            log=merchant.log_tail,
            timeout_s=HANG_S,
        )
    except AssertionError:
        merchant.kill()
        raise
