"""The third-party x402-conformance suite (moped2110/x402-conformance, from ../shared/peers) against
`x402-facilitator serve` on the dev chain, with `--settle`: all nine facilitator checks pass.

The suite reads its payment requirements from a 402 resource (here a tiny HTTP server on 127.0.0.1 that
answers every GET with the dev chain's requirements in `PAYMENT-REQUIRED`) and pays with a funded dev
payer: a real settlement on chain, an invalid one, and a replay of the first. `scripts/setup` installs
the suite into its own virtualenv; without the peers folder the test skips, except under CI.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from a2a_x402.devchain import DevChain
from tests.fixtures.error_logs import watch_log
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.servers import free_port, wait_answering_blocking
from tests.fixtures.subprocesses import unavailable

from .payments import relayer_nonce

_SUITE = Path(__file__).resolve().parents[2] / ".venv-peers" / "x402-conformance" / "bin" / "x402-conformance"
_CHECKS = 9
_STARTUP_TIMEOUT_S = 30.0
_SUITE_TIMEOUT_S = 300.0


def _suite() -> Path:
    if _SUITE.exists():
        return _SUITE
    message = f"x402-conformance is not installed in {_SUITE.parent.parent} (./scripts/setup installs it "
    message += "from ../shared/peers/x402-conformance)"
    unavailable(message)


@pytest.fixture
def resource_url(chain: DevChain) -> Iterator[str]:
    """A 402 resource on 127.0.0.1 asking for the dev chain's payment to PAY_TO."""
    header = ""

    class Resource(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            self.send_response(402)
            self.send_header("PAYMENT-REQUIRED", header)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the hook's signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Resource)
    url = f"http://127.0.0.1:{server.server_address[1]}/paid"
    required = {
        "x402Version": 2,
        "resource": {"url": url, "description": "a paid resource"},
        "accepts": [make_requirements(chain).to_json_dict()],
    }
    header = base64.b64encode(orjson.dumps(required)).decode()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def facilitator_process(chain: DevChain, sqlite_url: str, tmp_path: Path) -> Iterator[str]:
    """`x402-facilitator serve` as its own process on the dev chain; its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "X402_RPC_URL": chain.rpc_url,
        "X402_NETWORK": chain.network,
        "X402_RELAYER_KEY": chain.relayer_key,
        "X402_DATABASE_URL": sqlite_url,
        "X402_PORT": str(port),
        # The suite sends no Authorization header: the facilitator runs in its explicit public mode.
        "X402_FACILITATOR_PUBLIC": "true",
    }
    log = (tmp_path / "facilitator.log").open("wb")
    watch_log(tmp_path / "facilitator.log")
    process = subprocess.Popen(  # noqa: S603 - our own console script
        [str(Path(sys.executable).with_name("x402-facilitator")), "serve"],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_answering_blocking(
            base_url + "/healthz",
            running=lambda: process.poll() is None,
            what="x402-facilitator serve",
            log=(tmp_path / "facilitator.log").read_text,
            timeout_s=_STARTUP_TIMEOUT_S,
        )
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def test_the_peer_suite_passes_all_nine_facilitator_checks_with_settlement(
    chain: DevChain,
    facilitator_process: str,
    resource_url: str,
    new_payer: Callable[..., str],
    tmp_path: Path,
) -> None:
    suite = _suite()
    report = tmp_path / "report.json"
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)
    command = [
        str(suite),
        "facilitator",
        facilitator_process,
        "--resource",
        resource_url,
        "--settle",
        "--rpc-url",
        chain.rpc_url,
        "--signer-key",
        new_payer(),
        "--json",
        str(report),
        "--quiet",
    ]

    run = subprocess.run(  # noqa: S603 - the installed peer suite, fixed arguments
        command, cwd=tmp_path, capture_output=True, text=True, timeout=_SUITE_TIMEOUT_S, check=False
    )

    assert report.exists(), run.stdout + run.stderr
    outcome = json.loads(report.read_text())
    statuses = {result["check_id"]: result["status"] for result in outcome["results"]}
    details = {result["check_id"]: result["detail"] for result in outcome["results"]}
    assert statuses == dict.fromkeys(statuses, "pass"), details
    assert len(statuses) == _CHECKS, statuses
    assert outcome["summary"] == {"total": _CHECKS, "passed": _CHECKS, "failed": 0, "skipped": 0, "errors": 0}
    assert run.returncode == 0, run.stdout + run.stderr
    # One real settlement (FA-SET-001); the invalid settle and the replay broadcast nothing.
    assert relayer_nonce(chain) == nonce_before + 1
    assert chain.balance_of(PAY_TO) == payee_before + make_requirements(chain).amount
