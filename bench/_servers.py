"""Facilitator servers under test, each a uvicorn process of its own with one worker.

A process per server keeps the load generator's CPU apart from the server's and lets the benchmark read
each server's CPU time from /proc. Ours is started with the project's own CLI (``x402-facilitator
serve``) on a copy of a claim store migrated once with ``x402-facilitator db upgrade``; the reference is
``bench._x402_reference_app`` under the uvicorn CLI with the same server settings (one worker, no access
log). Every server process gets its own session, so stopping it stops everything it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from a2a_x402.facilitator.cli import KEEP_ALIVE_S

from ._chain import process_cpu_s
from ._http_floor_app import HOLD_ENV

__all__ = [
    "ServerProcess",
    "free_port",
    "migrate_claim_store",
    "spawn_server",
    "start_http_floor",
    "start_ours",
    "start_reference",
]

_REPO_ROOT = Path(__file__).resolve().parent.parent
_BIN = Path(sys.executable).parent
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 10.0


@dataclass
class ServerProcess:
    """A running server: its port, process and log file."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def target(self) -> tuple[str, int]:
        """(host, port) for the load generator."""
        return ("127.0.0.1", self.port)

    def cpu_s(self, *, system_only: bool = False) -> float | None:
        """CPU seconds the server process has used so far (only its system time with `system_only`)."""
        return process_cpu_s(self.process.pid, system_only=system_only)

    def wait_ready(self, path: str) -> None:
        """Return once GET `path` answers 200.

        Raises:
            RuntimeError: the process exited or did not answer within a minute (its log tail is included).
        """
        deadline = time.monotonic() + _START_TIMEOUT_S
        url = f"http://127.0.0.1:{self.port}{path}"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.05)
        raise RuntimeError(
            f"{self.name} did not become ready within {_START_TIMEOUT_S} s:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """Terminate the server's process group: SIGTERM, then SIGKILL after ten seconds."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=_STOP_TIMEOUT_S)
            except ProcessLookupError:
                pass  # it exited between the poll and the signal
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's log."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the server binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spawn_server(
    name: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    log_path: Path,
    port: int,
    *,
    ready_path: str = "/healthz",
) -> ServerProcess:
    """Start `command` in a session of its own, its output appended to `log_path`, and wait until it
    answers `ready_path`; a server that does not is stopped."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen(  # noqa: S603 - fixed executables from this virtualenv, no shell
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ServerProcess(name=name, port=port, process=process, log_path=log_path)
    try:
        server.wait_ready(ready_path)
    except BaseException:
        server.stop()
        raise
    return server


def _code(source: Path | None) -> dict[str, str]:
    """The environment that makes ``x402-facilitator`` run the code of checkout `source` (None: this one)."""
    return {"PYTHONPATH": str(source)} if source is not None else {}


def _facilitator_command(source: Path | None) -> list[str]:
    """``x402-facilitator`` of checkout `source` (None: this one), whichever layout that commit had: the
    packages under ``a2a_x402/``, or at the top level as before the one namespace."""
    if source is None:
        return [str(_BIN / "x402-facilitator")]
    module = (
        "a2a_x402.facilitator.cli" if (source / "a2a_x402" / "facilitator").is_dir() else "facilitator.cli"
    )
    return [str(_BIN / "python"), "-c", f"from {module} import main; main()"]


def migrate_claim_store(workdir: Path, *, source: Path | None = None, tag: str = "template") -> Path:
    """Create an SQLite claim store with ``x402-facilitator db upgrade``; servers start on copies of it.

    With `source`, the checkout's own code and migrations make it (a server of that code checks its schema).
    """
    template = workdir / f"claims-{tag}.db"
    env = {**os.environ, **_code(source), "X402_DATABASE_URL": f"sqlite+aiosqlite:///{template}"}
    subprocess.run(  # noqa: S603 - fixed executable from this virtualenv, no shell
        [*_facilitator_command(source), "db", "upgrade"],
        cwd=workdir,
        env=env,
        check=True,
        capture_output=True,
    )
    return template


def start_ours(
    *,
    rpc_url: str,
    network: str,
    relayer_key: str,
    template_db: Path,
    workdir: Path,
    tag: str,
    source: Path | None = None,
) -> ServerProcess:
    """Start ``x402-facilitator serve`` on a fresh copy of the migrated claim store and wait until ready.

    It runs in `workdir`, so no ``.env`` file of the repository changes its settings; with `source`, it runs
    the code of that checkout (an earlier commit, for a comparison in the same run).
    """
    database = workdir / f"claims-{tag}.db"
    shutil.copyfile(template_db, database)
    port = free_port()
    env = {
        **os.environ,
        **_code(source),
        "X402_RPC_URL": rpc_url,
        "X402_NETWORK": network,
        "X402_RELAYER_KEY": relayer_key,
        "X402_DATABASE_URL": f"sqlite+aiosqlite:///{database}",
        "X402_PORT": str(port),
        # The load sends no API key: the facilitator runs public (a key adds one indexed read a request).
        "X402_FACILITATOR_PUBLIC": "true",
    }
    command = [*_facilitator_command(source), "serve", "--port", str(port)]
    return spawn_server(f"ours[{tag}]", command, env, workdir, workdir / f"ours-{tag}.log", port)


def start_reference(
    *, rpc_url: str, network: str, relayer_key: str, workdir: Path, tag: str
) -> ServerProcess:
    """Start the x402 SDK reference app under uvicorn (one worker) and wait until it answers."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(_REPO_ROOT),
        "BENCH_REF_RPC_URL": rpc_url,
        "BENCH_REF_NETWORK": network,
        "BENCH_REF_PRIVATE_KEY": relayer_key,
    }
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "bench._x402_reference_app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    log_path = workdir / f"reference-{tag}.log"
    name = f"reference[{tag}]"
    return spawn_server(name, command, env, _REPO_ROOT, log_path, port, ready_path="/supported")


def start_http_floor(*, workdir: Path, tag: str, hold_s: float) -> ServerProcess:
    """Start ``bench._http_floor_app`` under uvicorn with the settings ``x402-facilitator serve`` uses
    (one worker, uvicorn's default loop and parser, no access log, the same keep-alive), holding each
    answer for `hold_s` seconds."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(_REPO_ROOT), HOLD_ENV: repr(hold_s)}
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "bench._http_floor_app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--log-level", "warning", "--no-access-log", "--timeout-keep-alive", str(KEEP_ALIVE_S),
    ]  # fmt: skip
    log_path = workdir / f"floor-{tag}.log"
    return spawn_server(f"floor[{tag}]", command, env, _REPO_ROOT, log_path, port)
