"""The commands the tests fork from a zygote (`tests/fixtures/forked.py`) are processes as the ones
`subprocess` starts: the same output and exit status, their own environment and directory, and SIGKILL
ends them where they stand."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.fixtures import forked
from tests.fixtures.deadlines import HANG_S, wait_until

_SCRIPT = """
import os, sys, time
env = os.environ
print(env.get("ONLY_HERE"), env.get("X402_FROM_THE_TESTS"), os.getcwd(), sys.argv[1:], flush=True)
if sys.argv[1:] == ["hold"]:
    time.sleep(600)
sys.exit(7)
"""


async def test_a_forked_console_script_answers_as_one_started_by_subprocess(tmp_path: Path) -> None:
    script = str(Path(sys.executable).with_name("x402-merchant"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("X402_")}
    real = await asyncio.to_thread(
        subprocess.run,  # our own console script
        [script, "nonsense"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )

    answer = await forked.run(
        [script, "nonsense"], env=env, cwd=tmp_path, timeout_s=HANG_S, stop_timeout_s=HANG_S
    )

    assert answer == (real.returncode, real.stdout, real.stderr)
    assert answer[0] == 2 and answer[2].startswith(b"x402-merchant: No such command")


async def test_a_forked_script_has_only_its_environment_and_directory_and_dies_by_sigkill(
    tmp_path: Path,
) -> None:
    (tmp_path / "script.py").write_text(_SCRIPT)
    os.environ["X402_FROM_THE_TESTS"] = "leaked"
    try:
        argv = [sys.executable, "-P", str(tmp_path / "script.py")]
        code, out, _ = await forked.run(
            [*argv, "once"], env={"ONLY_HERE": "yes"}, cwd=tmp_path, timeout_s=HANG_S, stop_timeout_s=HANG_S
        )
        assert (code, out.decode()) == (7, f"yes None {tmp_path} ['once']\n")

        with (tmp_path / "out").open("wb") as log:
            held = forked.spawn([*argv, "hold"], env={}, cwd=tmp_path, stdout=log)
        await wait_until(lambda: (tmp_path / "out").stat().st_size > 0, what="the script started")
        assert held.poll() is None
        held.kill()
        assert await asyncio.wait_for(held.wait_async(), HANG_S) == -signal.SIGKILL
        assert held.wait(0) == -signal.SIGKILL
    finally:
        del os.environ["X402_FROM_THE_TESTS"]
