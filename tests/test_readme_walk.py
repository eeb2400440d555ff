"""The hand path of the quickstart (docs/quickstart.md, once in the README), run as written: setup, then
one bash per terminal (dev chain, facilitator, merchant settling through it, a paying client), against
loopback.

The block is the fenced one after the `readme-walk` marker; a `# terminal N` comment starts a terminal. The
walk runs in a fresh directory holding links to the checkout's files (so nothing it writes, `.devchain.env`,
`.api-token`, `.facilitator-key` and `x402.db`, lands in the checkout and no developer's `.env` is read),
with the block's two ports replaced by free ones. Each terminal but the last keeps serving: the next starts
when it is ready (its env file written, or its `--port` answering `/healthz`). The last must pay and see the
payment in the ledger, through the billing API too. Every terminal's process group is interrupted at the
end, then killed if it lingers.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.fixtures.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "quickstart.md"
MARKER = "<!-- readme-walk:"
PORTS = ("4022", "8000")
_READY_TIMEOUT_S = 120.0
_RUN_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 20.0
Popen = subprocess.Popen[str]
_STATE_FILES = {
    ".git",
    ".env",
    ".devchain.env",
    ".api-token",
    ".facilitator-key",
    "x402.db",
    "x402.db-wal",
    "x402.db-shm",
}


@dataclass
class Terminal:
    """One terminal of the walk: its heading and its commands, as bash source."""

    title: str
    script: str


def readme_walk(readme: str) -> tuple[str, list[Terminal]]:
    """The setup commands and the terminals of the hand path in `readme` (the quickstart page's text)."""
    after = readme.split(MARKER, 1)[1].split("\n", 1)[1]
    match = re.match(r"```bash\n(.*?)\n```", after, re.DOTALL)
    assert match, f"the line after {MARKER!r} must open a ```bash block"
    setup, *parts = re.split(r"^# (terminal \d+[^\n]*)\n", match[1], flags=re.MULTILINE)
    terminals = [Terminal(title, script) for title, script in zip(parts[::2], parts[1::2], strict=True)]
    return setup, terminals


def test_the_walk_has_a_setup_step_and_four_terminals() -> None:
    setup, terminals = readme_walk(PAGE.read_text())

    assert "./scripts/setup" in setup
    assert [t.title.split(":")[0] for t in terminals] == [f"terminal {n}" for n in range(1, 5)]
    assert all('eval "$(.venv/bin/x402-devchain --export)"' in t.script for t in terminals[1:])
    assert "export X402_FACILITATOR_URL=http://127.0.0.1:4022" in terminals[2].script
    assert "export X402_API_TOKEN=" in terminals[2].script  # else the billing API and dashboard answer 401
    assert "/tenants/default/ledger/balance" in terminals[3].script


def _walk_dir(tmp_path: Path) -> Path:
    walk = tmp_path / "checkout"
    walk.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in _STATE_FILES:
            (walk / entry.name).symlink_to(entry)
    return walk


def _bash(script: str, cwd: Path, env: dict[str, str], stdout: IO[str] | int, stderr: IO[str] | int) -> Popen:
    return subprocess.Popen(  # noqa: S603 - bash running the quickstart's own commands
        ["bash", "-eu", "-o", "pipefail", "-c", script],  # noqa: S607 - bash from PATH
        cwd=cwd,
        env=env,
        text=True,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,  # its own process group: stopped as one at the end
    )


def _wait_ready(terminal: Terminal, process: subprocess.Popen[str], cwd: Path, log: Path) -> None:
    last = terminal.script.strip().splitlines()[-1]
    port = re.search(r"--port (\d+)", last)
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            pytest.fail(f"{terminal.title} exited with {process.returncode}:\n{log.read_text()}")
        if port is None:
            ready = (cwd / ".devchain.env").is_file()
        else:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port[1]}/healthz", timeout=1.0).status_code == 200
            except httpx.TransportError:
                ready = False
        if ready:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{terminal.title} not ready within {_READY_TIMEOUT_S} s:\n{log.read_text()}")
        time.sleep(0.1)


@contextmanager
def _stopped_at_exit() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in reversed(started):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(_STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


@pytest.mark.timeout(900)  # setup, three servers and a payment, each with its own bound, on a busy machine
def test_the_readme_hand_path_runs_as_written(tmp_path: Path) -> None:
    text = PAGE.read_text()
    for port in PORTS:
        text = re.sub(rf"\b{port}\b", str(free_port()), text)
    setup, terminals = readme_walk(text)
    walk = _walk_dir(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("X402_")}
    # The peer suites sit beside the real checkout, not beside the walk's directory.
    env["X402_PEERS_DIR"] = str((ROOT / ".." / "shared" / "peers").resolve())

    installed = subprocess.run(  # noqa: S603 - the quickstart's own command
        ["bash", "-eu", "-c", setup],  # noqa: S607 - bash from PATH
        cwd=walk,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr

    with _stopped_at_exit() as started:
        for terminal in terminals[:-1]:
            log = tmp_path / f"{terminal.title.split(':')[0].replace(' ', '-')}.log"
            with log.open("w") as sink:
                started.append(_bash(terminal.script, walk, env, stdout=sink, stderr=subprocess.STDOUT))
            _wait_ready(terminal, started[-1], walk, log)
        client = _bash(terminals[-1].script, walk, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started.append(client)
        out, err = client.communicate(timeout=_RUN_TIMEOUT_S)

    assert client.returncode == 0, f"{out}\n{err}"
    balance = out.strip().splitlines()[-1].split()
    assert balance[0].startswith("eip155:") and balance[-1] == "10000", out
    assert "paid: 10000 atomic units to 0xa0Ee7A142d267C1f36714E4a8F75612F20a79720" in out, out
    # The billing API took the default tenant's token, and names that tenant as its path does (691e0cf).
    assert '{"tenant":"default","balances":[{' in out, out
    assert not (walk / ".devchain.env").exists()  # the dev chain stopped and cleaned up
