"""Run a private anvil node on loopback for development and tests.

anvil is ``X402_ANVIL_BIN``, else the pinned npm package ``@foundry-rs/anvil`` in a checkout's
``node_modules``, else the one on ``PATH`` (``_binary``). A checkout's binary is spawned directly (not
through ``npx``, whose Node wrapper would swallow our signals), each anvil in its own process group, with
its own state directory that ``stop()`` deletes: anvil 1.7.1 otherwise leaves ``anvil-state-*`` folders
under ``~/.foundry``. Its own process group keeps a terminal's Ctrl-C from reaching it before its owner
stops it; an owner that cannot run ``stop()`` (SIGKILLed) would then leave it running, so a long-lived owner
(``x402-devchain``) asks Linux to send anvil SIGTERM when it dies (``die_with_parent``).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from ._binary import find_anvil
from ._errors import AnvilStartError
from ._rpc import RpcClient

__all__ = ["ANVIL_DEV_KEYS", "DEFAULT_CHAIN_ID", "AnvilNode", "port_is_free"]

# Base Sepolia's chain id, so the dev token looks like Base Sepolia USDC to x402 clients.
DEFAULT_CHAIN_ID = 84532

# anvil's public dev accounts 0..9 from the mnemonic "test test ... junk"; well known, never secret.
ANVIL_DEV_KEYS: tuple[str, ...] = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
)

# Pre-binding a free port leaves a small window for another process to take it; retry then.
_PORT_ATTEMPTS = 3

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when the thread that forked it ends


def _signalled_when_parent_dies(parent: int) -> None:
    """In the forked child, before anvil is executed: SIGTERM on the parent's death, which may already
    have happened while forking (then the child is reparented, and ends now)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM) != 0 or os.getppid() != parent:
        os._exit(1)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_free(port: int) -> bool:
    """True if a listener could bind ``port`` on 127.0.0.1 now, as anvil binds it (``SO_REUSEADDR``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class AnvilNode:
    """One anvil process on 127.0.0.1 with a private state directory.

    Use as a context manager, or call ``start()`` and ``stop()``. anvil's stdout goes to
    ``<state_dir>/anvil.log``: it logs every RPC call, and an unread pipe would stall it. It listens on
    ``port`` if given, else on a free port.
    """

    def __init__(
        self,
        *,
        chain_id: int = DEFAULT_CHAIN_ID,
        binary: Path | None = None,
        extra_args: Sequence[str] = (),
        start_timeout_s: float = 10.0,
        port: int | None = None,
        die_with_parent: bool = False,
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port {port} is not a TCP port (1-65535)")
        self.chain_id = chain_id
        self.binary = binary or find_anvil()
        self.extra_args = tuple(extra_args)
        self.start_timeout_s = start_timeout_s
        self._fixed_port = port
        # Linux only, and tied to the thread that starts anvil: for an owner starting it from its main thread.
        self._die_with_parent = die_with_parent and sys.platform == "linux"
        self.port: int | None = None
        self.state_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._client: RpcClient | None = None

    def __enter__(self) -> AnvilNode:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def rpc_url(self) -> str:
        """The node's HTTP JSON-RPC endpoint."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def client(self) -> RpcClient:
        """The JSON-RPC client bound to the running node."""
        if self._client is None:
            raise RuntimeError("anvil is not running")
        return self._client

    @property
    def running(self) -> bool:
        """True while the anvil process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        """The anvil process id (also its process group id)."""
        if self._process is None:
            raise RuntimeError("anvil is not running")
        return self._process.pid

    def rpc(self, method: str, params: Sequence[Any] = ()) -> Any:
        """Call a JSON-RPC method, e.g. ``rpc("evm_snapshot")`` or ``rpc("anvil_mine", ["0x2"])``."""
        return self.client.call(method, params)

    def set_block_time(self, seconds: int) -> None:
        """Mine a block every `seconds`, as a real chain does; 0 mines one block per transaction (automine).

        Deploy first and switch after: with interval mining every transaction waits for the next tick.
        """
        if seconds < 0:
            raise ValueError("the block time is 0 (automine) or a number of seconds")
        # evm_setIntervalMining(0) leaves anvil mining on demand only, so automine is switched back on.
        self.rpc("evm_setIntervalMining", [seconds])
        if seconds == 0:
            self.rpc("evm_setAutomine", [True])

    def start(self) -> None:
        """Spawn anvil and return once it answers ``eth_chainId`` with the configured chain id.

        Raises:
            AnvilStartError: the given port is taken, anvil exited, or it did not answer within
                ``start_timeout_s``.
        """
        if self._process is not None:
            raise RuntimeError("anvil is already running")
        fixed = self._fixed_port
        if fixed is not None and not port_is_free(fixed):
            raise AnvilStartError(f"port {fixed} on 127.0.0.1 is taken by another process")
        self.state_dir = state_dir = Path(tempfile.mkdtemp(prefix="x402-anvil-"))
        try:
            # A port of our choosing that another process took in between is retried on another one.
            for _ in range(1 if fixed is not None else _PORT_ATTEMPTS):
                if self._spawn(fixed if fixed is not None else _free_port(), state_dir):
                    return
            raise AnvilStartError(f"anvil did not start; last log lines:\n{_log_tail(state_dir)}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate anvil's process group (SIGTERM, then SIGKILL) and delete its state directory."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._process is not None:
            _terminate(self._process)
            self._process = None
        if self.state_dir is not None:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            self.state_dir = None

    def _spawn(self, port: int, state_dir: Path) -> bool:
        """Start anvil on ``port``; False if it exited early (most likely the port was taken)."""
        command = [
            str(self.binary),
            "--host", "127.0.0.1",
            "--port", str(port),
            "--chain-id", str(self.chain_id),
            "--cache-path", str(state_dir / "cache"),
            "--max-persisted-states", "0",
            *self.extra_args,
        ]  # fmt: skip
        parent = os.getpid()
        on_fork = (lambda: _signalled_when_parent_dies(parent)) if self._die_with_parent else None
        with open(state_dir / "anvil.log", "ab") as log:
            process = subprocess.Popen(  # noqa: S603 - fixed binary, no shell
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=on_fork,
            )
        self.port, self._process = port, process
        self._client = RpcClient(self.rpc_url)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self._client.close()
                self._client, self._process = None, None
                return False
            try:
                answered = int(self._client.call("eth_chainId"), 16)
            except httpx.TransportError:
                time.sleep(0.01)
                continue
            if answered != self.chain_id:
                raise AnvilStartError(
                    f"anvil on port {port} reports chain id {answered}, not {self.chain_id}"
                )
            return True
        raise AnvilStartError(
            f"anvil did not answer within {self.start_timeout_s} s:\n{_log_tail(state_dir)}"
        )


def _log_tail(state_dir: Path, lines: int = 20) -> str:
    log = state_dir / "anvil.log"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=5)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
