"""The official A2A 1.0 and 0.3 TCKs against the reference merchant, each run once per test module.

The server under test is `merchant.app.build_app` (the edge, the payment layer, the in-process facilitator
on the session's dev chain) with every skill free and `ScenarioExecutor` as its agent, on SQLite, served
on 127.0.0.1. The TCK runs unpatched, from its folder beside the checkout (`../shared/peers/a2a-tck-1.0`,
or under `X402_PEERS_DIR`) and in its own virtualenv (`.venv-peers/a2a-tck-1.0`, made by
`scripts/setup`), as subprocesses: `run_tck.py` at MUST level, one run per transport (`jsonrpc`,
`http_json` and `grpc`), the three at once, each against a merchant of its own (so no run's tasks show in
another's lists), their outcomes merged: a transport-agnostic test each run repeats counts once, by its
worst result. Most of a run is the TCK waiting (streams held open for ten seconds, a thirty-second gRPC
subscription), not computing: at once, the three take about as long as the slowest, some 45 s, where one
run over the three transports took two minutes. Each writes its reports into the folder it runs in, so it
runs in a copy of the folder in a temporary directory (the peer folder stays read-only).

The A2A 0.3 TCK (`../shared/peers/a2a-tck-0.3`, virtualenv `.venv-peers/a2a-tck-0.3`) runs the same way
against the 0.3 interfaces (the header-less card, the 0.3 JSON-RPC methods and the 0.3 HTTP+JSON paths)
of a merchant with a tenants file (the default tenant and `TENANT_0_3`, both free): `run_tck.py
--category mandatory`, with `--transports jsonrpc` and with `rest`, each at the root (the default
tenant's URLs) and at the named tenant's (`/t/acme/...`), each run in its own copy of the folder, with
the plain messages played as its own SUT plays them (`scenarios.work_then_answer`). Its runner writes no
JUnit report, so the pytest it starts is asked for one through `PYTEST_ADDOPTS`.

The 0.3 TCK reads the card at the well-known path of its URL's origin (`scheme://host:port`, the 0.3
spec's recommended location, §5.3), whatever the path, and tests the interfaces that card lists. A
tenant's card is at its root (`/t/acme/.well-known/agent-card.json`), so the tenant is given an origin of
its own, as a deployment giving each tenant a host would: a second listening socket of the same server,
where the well-known card is the tenant's 0.3 card and every other path is the merchant's. Pointed at
`http://127.0.0.1:PORT/t/acme/a2a/jsonrpc` there, the TCK reads acme's card, whose interfaces are acme's
URLs on the merchant's own origin, and posts its raw JSON-RPC checks to acme's endpoint.

The four runs (root and tenant, on each transport) go at once on the one merchant process: each
tenant's tasks are its own, and the 0.3 TCK lists none. A JSON-RPC run takes about 12 s, a REST one 6 s,
mostly waiting.

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
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.edge import AGENT_CARD_PATH, JSONRPC_PATH, tenant_root
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.storage import upgrade_schema
from tests.fixtures.merchant import DEFAULT_PAY_TO, TWO_TENANTS, write_tenants_file
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
TENANT_0_3 = "acme"
ROOTS_0_3 = ("root", TENANT_0_3)
"""Where the 0.3 TCK runs: at the merchant's root (the default tenant) and at `TENANT_0_3`'s `/t/acme`."""
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


def _run_tck(base_url: str, workdir: Path, transport: str) -> TckRun:
    tck = workdir / f"a2a-tck-{transport}"
    shutil.copytree(TCK_DIR, tck, ignore=shutil.ignore_patterns(".git", "__pycache__", "reports"))
    command = [str(TCK_PYTHON), "run_tck.py", "--sut-host", base_url, "--level", "must"]
    command += ["--transport", transport]
    finished = subprocess.run(  # noqa: S603 - a fixed command
        command,
        cwd=tck,
        env=_tck_environment(),
        capture_output=True,
        text=True,
        timeout=_RUN_TIMEOUT_S,
        check=False,
    )
    report = tck / "reports" / "junitreport.xml"
    if not report.is_file():
        raise AssertionError(
            f"the TCK wrote no report on {transport} (exit {finished.returncode}):\n"
            f"{finished.stdout}\n{finished.stderr}"
        )
    return TckRun(parse_junit(report), finished.stdout + finished.stderr)


_WORST_FIRST = ("error", "failed", "passed", "skipped")


def merge_runs(runs: list[TckRun]) -> TckRun:
    """One run of the runs' outcomes: a test case more than one run reports (a transport-agnostic one) counts
    once, by its worst result."""
    merged: dict[tuple[str, str], TckOutcome] = {}
    for outcome in (outcome for run in runs for outcome in run.outcomes):
        key = (outcome.classname, outcome.name)
        kept = merged.get(key)
        if kept is None or _WORST_FIRST.index(outcome.result) < _WORST_FIRST.index(kept.result):
            merged[key] = outcome
    return TckRun(tuple(merged.values()), "\n".join(run.output for run in runs))


class _TenantOrigin:
    """`app`, where requests reaching the listening socket on `port` for the well-known card get `tenant`'s
    own card instead: that socket is the tenant's origin. Everything else goes to `app` as it came."""

    def __init__(self, app: ASGIApp, port: int, tenant: str) -> None:
        self._app = app
        self._port = port
        self._card_path = tenant_root(tenant) + AGENT_CARD_PATH

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == AGENT_CARD_PATH and scope["server"][1] == self._port:
            scope = {**scope, "path": self._card_path, "raw_path": self._card_path.encode()}
        await self._app(scope, receive, send)


@asynccontextmanager
async def _reference_merchant(
    devchain: DevChain, workdir: Path, executor: ScenarioExecutor, *, tenant: str | None = None
) -> AsyncIterator[dict[str, str]]:
    """A free reference merchant playing the TCK's scenarios, served on 127.0.0.1: its base URL ("root").

    With `tenant` (a `TWO_TENANTS` id), that tenant (free too) is configured beside the default one, in a
    tenants file, and the base URL of the tenant's origin (see the module's docstring) is given under its id.
    """
    # Imported here, as in tests/fixtures/merchant.py: the composition root imports every merchant package.
    from a2a_x402.merchant.app import build_app

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
        "host": "127.0.0.1",
        "grpc_port": free_port(),
        # A developer's .env must not change what the TCK judges.
        "_env_file": None,
    }
    if tenant is None:
        values.update(pay_to=DEFAULT_PAY_TO, price=0)
    else:
        payees = {"": (DEFAULT_PAY_TO, 0), tenant: (TWO_TENANTS[tenant][0], 0)}
        values["tenants_file"] = str(write_tenants_file(workdir / "tenants.toml", payees))
    app: ASGIApp = build_app(MerchantSettings(**values), delegate=executor)
    origins = {} if tenant is None else {tenant: bind_loopback()}
    for name, origin in origins.items():
        app = _TenantOrigin(app, origin.getsockname()[1], name)
    with serve_asgi(app, sock=sock, also=list(origins.values())) as base_url:
        yield {"root": base_url, **{name: base_url_of(origin) for name, origin in origins.items()}}


def _skip_or_fail(missing: str | None) -> None:
    if missing is not None:
        unavailable(missing)


@pytest.fixture(scope="module")
async def tck_run(devchain: DevChain, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TckRun]:
    """The TCK's outcomes against a free reference merchant playing the TCK's scenarios."""
    _skip_or_fail(_missing())
    async with AsyncExitStack() as servers:
        runs = []
        for transport in TRANSPORTS:
            workdir = tmp_path_factory.mktemp(f"tck-{transport}")
            origins = await servers.enter_async_context(
                _reference_merchant(devchain, workdir, ScenarioExecutor())
            )
            # The servers run on their own threads and loops; the session's loop must stay free meanwhile.
            runs.append(asyncio.to_thread(_run_tck, origins["root"], workdir, transport))
        yield merge_runs(list(await asyncio.gather(*runs)))


def _missing_0_3() -> str | None:
    if not (TCK_0_3_DIR / "run_tck.py").is_file():
        return f"the A2A 0.3 TCK is not at {TCK_0_3_DIR} (the peer suites belong at ../shared/peers)"
    if not TCK_0_3_PYTHON.is_file():
        return f"the 0.3 TCK's virtualenv {TCK_0_3_PYTHON.parent.parent} is missing: run ./scripts/setup"
    return None


def _run_tck_0_3(sut_url: str, workdir: Path, name: str, transport: str) -> TckRun:
    tck = workdir / f"a2a-tck-0.3-{name}-{transport}"
    shutil.copytree(TCK_0_3_DIR, tck, ignore=shutil.ignore_patterns(".git", "__pycache__", "reports"))
    report = tck / "reports" / "junitreport.xml"
    command = [
        str(TCK_0_3_PYTHON),
        "run_tck.py",
        # The JSON-RPC endpoint: its raw JSON-RPC checks post there, and the card is read from its origin.
        "--sut-url",
        sut_url,
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


@dataclass(frozen=True, slots=True)
class TckRunsV0_3:
    """The 0.3 TCK's runs, by (`ROOTS_0_3` entry, transport), and the JSON-RPC URL each root's runs were
    pointed at (served for as long as the tests of the module run)."""

    runs: dict[tuple[str, str], TckRun]
    sut_urls: dict[str, str]


def _sut_url_0_3(origins: dict[str, str], name: str) -> str:
    """The 0.3 JSON-RPC endpoint of `name` (a `ROOTS_0_3` entry), on the origin whose card is its own."""
    return origins[name] + ("" if name == "root" else tenant_root(name)) + JSONRPC_PATH


@pytest.fixture(scope="module")
async def tck_0_3_runs(
    devchain: DevChain, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[TckRunsV0_3]:
    """The 0.3 TCK's mandatory outcomes at the root and at `TENANT_0_3`'s URLs, against one free merchant."""
    _skip_or_fail(_missing_0_3())
    workdir = tmp_path_factory.mktemp("tck03")
    executor = ScenarioExecutor(work_then_answer)
    async with _reference_merchant(devchain, workdir, executor, tenant=TENANT_0_3) as origins:
        sut_urls = {name: _sut_url_0_3(origins, name) for name in ROOTS_0_3}
        keys = [(name, transport) for transport in TRANSPORTS_0_3 for name in ROOTS_0_3]
        done = await asyncio.gather(
            *(asyncio.to_thread(_run_tck_0_3, sut_urls[key[0]], workdir, *key) for key in keys)
        )
        yield TckRunsV0_3(dict(zip(keys, done, strict=True)), sut_urls)
