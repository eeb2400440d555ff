"""`x402-demo` stopped by Ctrl-C (SIGINT) or SIGTERM while it runs: it stops the dev chain and the merchant
it started, says so in one line and exits with status 0 (a stop the user asked for is no failure)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from a2a_x402.devchain import RpcClient
from tests.fixtures.deadlines import within_deadline

_STARTED_S = 60.0  # anvil and the token's deployment, on however busy a machine


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_demo_and_what_it_started_in_one_line_with_exit_0(
    signum: signal.Signals, workdir: Path
) -> None:
    process = subprocess.Popen(  # noqa: S603 - our own console script
        [str(Path(sys.executable).with_name("x402-demo")), "--no-stream"],
        cwd=workdir,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # "dev chain: <rpc url> (...)": the chain runs
        assert first.startswith("dev chain: "), first
        rpc_url = first.split()[2]
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=within_deadline(_STARTED_S))
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    assert process.returncode == 0, stderr
    assert stderr.splitlines() == [
        f"x402-demo stopped by {signum.name}: the chain and merchant it started are gone"
    ], stderr
    with pytest.raises(httpx.TransportError), RpcClient(rpc_url) as rpc:
        rpc.call("eth_chainId")
