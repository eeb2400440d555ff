"""`x402-demo` at `X402_LOG_LEVEL=DEBUG` (the merchant and `x402-pay` it runs inherit it) prints no piece of
its keys and no payment signature, end to end on a real dev chain, merchant and payer (issue 25)."""

from __future__ import annotations

import re
from pathlib import Path

from a2a_x402.devchain import ANVIL_DEV_KEYS
from tests.fixtures.commands import assert_no_secret, run_command


async def test_the_demo_at_debug_prints_no_key_and_no_signature(workdir: Path) -> None:
    # The whole demo (chain, deployment, merchant, payment) on however busy a machine: a hang guard inside
    # the per-test one, beyond the demo's own wait for its merchant.
    answer = await run_command(
        ["x402-demo", "--no-stream"], cwd=workdir, env={"X402_LOG_LEVEL": "DEBUG"}, timeout_s=240
    )

    assert answer.returncode == 0, answer.stderr
    assert "INFO HTTP Request: POST" in answer.stderr  # the payer logged at the level given
    keys = {"deployer key": ANVIL_DEV_KEYS[0], "relayer key": ANVIL_DEV_KEYS[1]}
    assert_no_secret([answer.stdout, answer.stderr], {n: k.removeprefix("0x") for n, k in keys.items()})
    assert re.search(r"0x[0-9a-fA-F]{130,}", answer.stdout + answer.stderr) is None
