"""The official A2A 1.0 and 0.3 TCKs against the reference merchant, each run once per test module.

The server under test is `merchant.app.build_app` (the edge, the payment layer, the in-process facilitator
on the session's dev chain) with every skill free and `ScenarioExecutor` as its agent, on SQLite, served
on 127.0.0.1. The TCK runs unpatched, from its folder beside the checkout (`../shared/peers/a2a-tck-1.0`,
or under `X402_PEERS_DIR`) and in its own virtualenv (`.venv-peers/a2a-tck-1.0`, made by
`scripts/setup`), as a subprocess: `run_tck.py` at MUST level on the `jsonrpc`, `http_json` and `grpc`
transports. It writes its reports into the folder it runs in, so it runs in a copy of the folder in a
temporary directory (the peer folder stays read-only). One run per test session: it takes about two minutes.

The A2A 0.3 TCK (`../shared/peers/a2a-tck-0.3`, virtualenv `.venv-peers/a2a-tck-0.3`) runs the same way
against the same merchant's 0.3 interfaces (the header-less card, the 0.3 JSON-RPC methods and the 0.3
HTTP+JSON paths): `run_tck.py --category mandatory`, once with `--transports jsonrpc` and once with `rest`,
each in its own copy of the folder, with the plain messages played as its own SUT plays them
(`scenarios.work_then_answer`). Its runner writes no JUnit report, so the pytest it starts is asked for
one through `PYTEST_ADDOPTS`.

Outside CI a missing TCK folder or virtualenv skips the tests, naming what is missing; under `CI=true`
they fail instead.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devchain import DevChain
from merchant.edge import JSONRPC_PATH
from merchant.settings import MerchantSettings
from storage import upgrade_schema
from tests.fixtures.merchant import DEFAULT_PAY_TO
from tests.fixtures.servers import base_url_of, bind_loopback, free_port, serve_asgi
from tests.fixtures.subprocesses import unavailable

from .scenarios import ScenarioExecutor, work_then_answer

CHECKOUT = Path(__file__).resolve().parents[2]
# As scripts/setup finds the peer suites: a relative X402_PEERS_DIR is relative to the checkout.
TCK_DIR = CHECKOUT / os.environ.get("X402_PEERS_DIR", "../shared/peers") / "a2a-tck-1.0"
TCK_PYTHON = CHECKOUT / ".venv-peers" / "a2a-tck-1.0" / "bin" / "python"
TRANSPORTS = ("jsonrpc", "http_json", "grpc")
TCK_0_3_DIR = TCK_DIR.with_name("a2a-tck-0.3")
TCK_0_3_PYTHON = CHECKOUT / ".venv-peers" / "a2a-tck-0.3" / "bin" / "python"
TRANSPORTS_0_3 = ("jsonrpc", "rest")
# A MUST run takes about two minutes on an idle machine; a loaded one may take several times that.
_RUN_TIMEOUT_S = 1200


@dataclass(frozen=True, slots=True)
class TckOutcome:
    """One TCK test case of the run: its pytest id (`test_must_requirement[CORE-SEND-003-jsonrpc]`) and
    how it ended (`passed`, `failed`, `error` or `skipped`), with the failure text when it did not pass."""

    name: str
    classname: str
    result: str
    detail: str


@dataclass(frozen=True, slots=True)
class TckRun:
    """What the TCK reported: every test case, and its console output for the failure messages."""

    outcomes: tuple[TckOutcome, ...]
    output: str

    def named(self, result: str) -> list[TckOutcome]:
        """The test cases that ended with `result`."""
        return [outcome for outcome in self.outcomes if outcome.result == result]


def _missing() -> str | None:
    if not (TCK_DIR / "run_tck.py").is_file():
        return f"the A2A 1.0 TCK is not at {TCK_DIR} (the peer suites belong at ../shared/peers)"
    if not TCK_PYTHON.is_file():
        return f"the TCK's virtualenv {TCK_PYTHON.parent.parent} is missing: run ./scripts/setup"
    return None


def _outcome(case: ET.Element) -> TckOutcome:
    result, detail = "passed", ""
    for child in case:
        if child.tag in ("failure", "error", "skipped"):
            result = {"failure": "failed"}.get(child.tag, child.tag)
            detail = child.get("message") or (child.text or "")
            break
    return TckOutcome(case.get("name", ""), case.get("classname", ""), result, detail)


def parse_junit(path: Path) -> tuple[TckOutcome, ...]:
    """Every test case in the TCK's JUnit report."""
    # Written by the TCK we just ran, on this machine.
    root = ET.parse(path).getroot()  # noqa: S314
    return tuple(_outcome(case) for case in root.iter("testcase"))


def _tck_environment() -> dict[str, str]:
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    # The TCK must not see this project's pytest settings or virtualenv.
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_WORKER", "VIRTUAL_ENV", "PYTHONPATH"):
        environment.pop(name, None)
    return environment


def _run_tck(base_url: str, workdir: Path) -> TckRun:
    tck = workdir / "a2a-tck"
    shutil.copytree(TCK_DIR, tck, ignore=shutil.ignore_patterns(".git", "__pycache__", "reports"))
    command = [
        str(TCK_PYTHON),
        "run_tck.py",
        "--sut-host",
        base_url,
        "--level",
        "must",
        "--transport",
        ",".join(TRANSPORTS),
    ]
    environment = _tck_environment()
    finished = subprocess.run(  # noqa: S603 - a fixed command
        command,
        cwd=tck,
        env=environment,
        capture_output=True,
        text=True,
        timeout=_RUN_TIMEOUT_S,
        check=False,
    )
    report = tck / "reports" / "junitreport.xml"
    if not report.is_file():
        raise AssertionError(
            f"the TCK wrote no report (exit {finished.returncode}):\n{finished.stdout}\n{finished.stderr}"
        )
    return TckRun(parse_junit(report), finished.stdout + finished.stderr)


@asynccontextmanager
async def _reference_merchant(
    devchain: DevChain, workdir: Path, executor: ScenarioExecutor
) -> AsyncIterator[str]:
    """A free reference merchant playing the TCK's scenarios, served on 127.0.0.1: its base URL."""
    # Imported here, as in tests/fixtures/merchant.py: the composition root imports every merchant package.
    from merchant.app import build_app

    database_url = f"sqlite+aiosqlite:///{workdir / 'x402.db'}"
    await upgrade_schema(database_url)
    sock = bind_loopback()
    values: dict[str, Any] = {
        "database_url": database_url,
        "rpc_url": devchain.rpc_url,
        "network": devchain.network,
        "asset": devchain.asset,
        "asset_name": devchain.asset_name,
        "asset_version": devchain.asset_version,
        "relayer_key": devchain.relayer_key,
        "public_url": base_url_of(sock),
        "pay_to": DEFAULT_PAY_TO,
        "price": 0,
        "host": "127.0.0.1",
        "grpc_port": free_port(),
        # A developer's .env must not change what the TCK judges.
        "_env_file": None,
    }
    app = build_app(MerchantSettings(**values), delegate=executor)
    with serve_asgi(app, sock=sock) as base_url:
        yield base_url


def _skip_or_fail(missing: str | None) -> None:
    if missing is not None:
        unavailable(missing)


@pytest.fixture(scope="module")
async def tck_run(devchain: DevChain, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TckRun]:
    """The TCK's outcomes against a free reference merchant playing the TCK's scenarios."""
    _skip_or_fail(_missing())
    workdir = tmp_path_factory.mktemp("tck")
    async with _reference_merchant(devchain, workdir, ScenarioExecutor()) as base_url:
        # The server runs on its own thread and loop; the session's loop must stay free meanwhile.
        yield await asyncio.to_thread(_run_tck, base_url, workdir)


def _missing_0_3() -> str | None:
    if not (TCK_0_3_DIR / "run_tck.py").is_file():
        return f"the A2A 0.3 TCK is not at {TCK_0_3_DIR} (the peer suites belong at ../shared/peers)"
    if not TCK_0_3_PYTHON.is_file():
        return f"the 0.3 TCK's virtualenv {TCK_0_3_PYTHON.parent.parent} is missing: run ./scripts/setup"
    return None


def _run_tck_0_3(base_url: str, workdir: Path, transport: str) -> TckRun:
    tck = workdir / f"a2a-tck-0.3-{transport}"
    shutil.copytree(TCK_0_3_DIR, tck, ignore=shutil.ignore_patterns(".git", "__pycache__", "reports"))
    report = tck / "reports" / "junitreport.xml"
    command = [
        str(TCK_0_3_PYTHON),
        "run_tck.py",
        "--sut-url",
        # The JSON-RPC endpoint: its raw JSON-RPC checks post there, and the card is read from its host.
        base_url + JSONRPC_PATH,
        "--category",
        "mandatory",
        "--transports",
        transport,
    ]
    environment = _tck_environment()
    # run_tck.py writes no JUnit report of its own; the pytest it starts is asked for one.
    environment["PYTEST_ADDOPTS"] = f"--junitxml={report}"
    finished = subprocess.run(  # noqa: S603 - a fixed command
        command,
        cwd=tck,
        env=environment,
        capture_output=True,
        text=True,
        timeout=_RUN_TIMEOUT_S,
        check=False,
    )
    if not report.is_file():
        raise AssertionError(
            f"the 0.3 TCK wrote no report (exit {finished.returncode}):\n{finished.stdout}\n{finished.stderr}"
        )
    return TckRun(parse_junit(report), finished.stdout + finished.stderr)


@pytest.fixture(scope="module")
async def tck_0_3_runs(
    devchain: DevChain, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, TckRun]]:
    """The 0.3 TCK's mandatory outcomes, by transport, against the same free reference merchant."""
    _skip_or_fail(_missing_0_3())
    workdir = tmp_path_factory.mktemp("tck03")
    async with _reference_merchant(devchain, workdir, ScenarioExecutor(work_then_answer)) as base_url:
        runs: dict[str, TckRun] = {}
        for transport in TRANSPORTS_0_3:
            # One run at a time: the TCK's tests wait on the server with short timeouts.
            runs[transport] = await asyncio.to_thread(_run_tck_0_3, base_url, workdir, transport)
        yield runs
