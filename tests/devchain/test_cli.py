"""``x402-devchain`` as a user runs it: settings out, a live chain while running, nothing left after."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from eth_account import Account

from a2a_x402.devchain import RpcClient, encode_call
from a2a_x402.devchain._envfile import home_port
from tests.fixtures.deadlines import HANG_S, within_deadline
from tests.fixtures.servers import bind_loopback, free_port

EXPECTED_KEYS = {
    "X402_RPC_URL",
    "X402_NETWORK",
    "X402_ASSET",
    "X402_ASSET_NAME",
    "X402_ASSET_VERSION",
    "X402_RELAYER_KEY",
    "X402_PAYER_KEYS",
    "X402_ERC6492_FACTORIES",
}


def wait_for_file(path: Path, process: subprocess.Popen[str], timeout_s: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"x402-devchain exited with {process.returncode}: {process.communicate()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path} not written within {timeout_s} s")
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_runs_a_chain_until_signalled(signum: signal.Signals, tmp_path: Path) -> None:
    env_file, temp_root = tmp_path / "chain.env", tmp_path / "tmp"
    temp_root.mkdir()
    command = [
        str(Path(sys.executable).with_name("x402-devchain")),
        "--chain-id", "31337",
        "--payers", "2",
        "--mint", "5000000",
        "--env-file", str(env_file),
    ]  # fmt: skip
    process = subprocess.Popen(  # noqa: S603 - our own console script
        command,
        env={**os.environ, "TMPDIR": str(temp_root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_file(env_file, process)
        text = env_file.read_text()
        settings = dict(line.split("=", 1) for line in text.splitlines())
        assert set(settings) == EXPECTED_KEYS
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
        assert (settings["X402_NETWORK"], settings["X402_ASSET_NAME"], settings["X402_ASSET_VERSION"]) == (
            "eip155:31337",
            "USDC",
            "2",
        )
        (state_dir,) = temp_root.glob("x402-anvil-*")

        with RpcClient(settings["X402_RPC_URL"]) as rpc:
            assert rpc.call("eth_chainId") == hex(31337)
            assert rpc.call("eth_getCode", [settings["X402_ASSET"], "latest"]) != "0x"
            assert rpc.call("eth_getCode", [settings["X402_ERC6492_FACTORIES"], "latest"]) != "0x"
            payers = [Account.from_key(key).address for key in settings["X402_PAYER_KEYS"].split(",")]
            assert len(payers) == 2
            for payer in payers:
                balance = rpc.eth_call(settings["X402_ASSET"], encode_call("balanceOf(address)", [payer]))
                assert int.from_bytes(balance, "big") == 5_000_000
                assert rpc.call("eth_getBalance", [payer, "latest"]) == "0x0"

        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=within_deadline(1))
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    assert process.returncode == 0
    assert stdout == text
    # One line says the stop, nothing else after the start-up note: no "Aborted!", no traceback.
    assert stderr.splitlines()[1:] == [
        f"x402-devchain stopped by {signum.name}: the chain and its state were deleted"
    ], stderr
    assert not state_dir.exists()
    assert not env_file.exists()
    with pytest.raises(httpx.TransportError), RpcClient(settings["X402_RPC_URL"]) as rpc:
        rpc.call("eth_chainId")


def _mining_mode(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> tuple[bool, int | None]:
    """(automine, interval in seconds) of the chain `x402-devchain *options` runs."""
    env_file = tmp_path / "chain.env"
    script = str(Path(sys.executable).with_name("x402-devchain"))
    command = [script, "--payers", "1", "--env-file", str(env_file)]
    process = subprocess.Popen(  # noqa: S603 - our own console script
        [*command, *options],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_file(env_file, process)
        settings = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
        with RpcClient(settings["X402_RPC_URL"]) as rpc:
            return rpc.call("anvil_getAutomine"), rpc.call("anvil_getIntervalMining")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=HANG_S)


def test_cli_mines_every_second_by_default_or_as_told_and_per_transaction_with_zero(tmp_path: Path) -> None:
    (tmp_path / "default").mkdir()
    (tmp_path / "zero").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "env").mkdir()

    assert _mining_mode(tmp_path / "default") == (False, 1)
    assert _mining_mode(tmp_path / "two", "--block-time", "2") == (False, 2)
    assert _mining_mode(tmp_path / "zero", "--block-time", "0") == (True, None)
    assert _mining_mode(tmp_path / "env", env={"X402_DEVCHAIN_BLOCK_TIME_S": "3"}) == (False, 3)


def test_export_prints_the_running_chains_settings_for_eval(tmp_path: Path) -> None:
    env_file = tmp_path / ".devchain.env"
    script = str(Path(sys.executable).with_name("x402-devchain"))
    process = subprocess.Popen(  # noqa: S603 - our own console script
        [script, "--payers", "2", "--block-time", "0"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_file(env_file, process)
        written = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
        # What the quickstart has every other terminal run, then each variable as that shell sees it.
        shown = subprocess.run(  # noqa: S603 - fixed argv, our own script
            ["bash", "-c", f'eval "$({script} --export)" && env'],  # noqa: S607 - bash from PATH
            cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if not k.startswith("X402_")},
            capture_output=True,
            text=True,
            timeout=HANG_S,
            check=True,
        )
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=HANG_S)

    exported = dict(line.split("=", 1) for line in shown.stdout.splitlines() if line.startswith("X402_"))
    assert exported == written
    assert set(exported) == EXPECTED_KEYS


def test_export_without_a_running_chain_says_so_and_prints_nothing(tmp_path: Path) -> None:
    script = str(Path(sys.executable).with_name("x402-devchain"))
    stale = tmp_path / "stale.env"
    stale.write_text("X402_RPC_URL=http://127.0.0.1:9\nX402_NETWORK=eip155:31337\n")

    missing = subprocess.run(  # noqa: S603 - our own console script
        [script, "--export"], cwd=tmp_path, capture_output=True, text=True, timeout=HANG_S, check=False
    )
    dead = subprocess.run(  # noqa: S603 - our own console script
        [script, "--export", "--env-file", str(stale)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )

    # The user's mistake (no chain started yet, or it stopped): one line and exit status 2, as for any other.
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == (
        "x402-devchain: no dev chain is running here: .devchain.env does not exist; "
        "start `x402-devchain` first\n"
    )
    assert (dead.returncode, dead.stdout) == (2, "")
    assert dead.stderr.startswith(
        f"x402-devchain: the dev chain of {stale} does not answer at http://127.0.0.1:9"
    )
    assert "start `x402-devchain` again" in dead.stderr and dead.stderr.count("\n") == 1
    # Why, in words: never an exception's class name.
    assert "(connection refused)" in dead.stderr and "Error" not in dead.stderr


def _start(cwd: Path, *options: str, tmpdir: Path | None = None) -> subprocess.Popen[str]:
    script = str(Path(sys.executable).with_name("x402-devchain"))
    return subprocess.Popen(  # noqa: S603 - our own console script
        [script, "--payers", "1", "--block-time", "0", *options],
        cwd=cwd,
        env={**os.environ, **({"TMPDIR": str(tmpdir)} if tmpdir else {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(process: subprocess.Popen[str]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=HANG_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode


def test_a_second_chain_in_the_same_checkout_is_refused_and_the_first_keeps_its_file(tmp_path: Path) -> None:
    env_file, temp_root = tmp_path / ".devchain.env", tmp_path / "tmp"
    temp_root.mkdir()
    first = _start(tmp_path, tmpdir=temp_root)
    try:
        wait_for_file(env_file, first)
        text = env_file.read_text()
        rpc_url = dict(line.split("=", 1) for line in text.splitlines())["X402_RPC_URL"]
        (first_state,) = temp_root.glob("x402-anvil-*")
        second = _start(tmp_path, tmpdir=temp_root)
        stdout, stderr = second.communicate(timeout=HANG_S)
        # Nothing started, nothing written: the first chain, its file and its --export are as they were.
        assert (second.returncode, stdout) == (2, "")
        assert stderr == (
            f"x402-devchain: not starting: a dev chain is already running here at {rpc_url} "
            "(its settings are in .devchain.env); "
            'use it (eval "$(x402-devchain --export)"), stop it (Ctrl-C in its terminal), '
            "or start this one with another --env-file\n"
        )
        assert list(temp_root.glob("x402-anvil-*")) == [first_state]
        assert env_file.read_text() == text
        assert first.poll() is None
        with RpcClient(rpc_url) as rpc:
            assert rpc.call("eth_chainId")
    finally:
        assert _stop(first) == 0
    assert not env_file.exists()


def test_a_stale_env_file_is_replaced_and_removed_on_exit(tmp_path: Path) -> None:
    env_file = tmp_path / ".devchain.env"
    env_file.write_text("X402_RPC_URL=http://127.0.0.1:9\nX402_NETWORK=eip155:31337\n")  # its chain stopped
    process = _start(tmp_path)
    try:
        deadline = time.monotonic() + HANG_S
        while "X402_ASSET=" not in env_file.read_text():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the stale env file was not replaced"
            time.sleep(0.02)
        assert set(dict(line.split("=", 1) for line in env_file.read_text().splitlines())) == EXPECTED_KEYS
    finally:
        assert _stop(process) == 0
    assert not env_file.exists()


def test_on_exit_an_env_file_another_run_has_written_since_is_left_alone(tmp_path: Path) -> None:
    env_file = tmp_path / "chain.env"
    process = _start(tmp_path, "--env-file", str(env_file))
    try:
        wait_for_file(env_file, process)
        others = "X402_RPC_URL=http://127.0.0.1:9\n"  # written by someone else while this chain ran
        env_file.write_text(others)
    finally:
        assert _stop(process) == 0
    assert env_file.read_text() == others


def _rpc_port(env_file: Path) -> int:
    rpc_url = dict(line.split("=", 1) for line in env_file.read_text().splitlines())["X402_RPC_URL"]
    return int(rpc_url.rsplit(":", 1)[1])


def _run_once(cwd: Path, *options: str) -> tuple[int, str]:
    """(the port of a chain started in `cwd` with `options`, its stderr), once it has answered and stopped."""
    env_file = cwd / ".devchain.env"
    process = _start(cwd, *options)
    try:
        deadline = time.monotonic() + HANG_S
        while not env_file.exists() or "X402_ASSET=" not in env_file.read_text():  # not a stale file's
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, f"{env_file} not written within {HANG_S} s"
            time.sleep(0.02)
        port = _rpc_port(env_file)
        with RpcClient(f"http://127.0.0.1:{port}") as rpc:
            assert rpc.call("eth_chainId")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=within_deadline(1))
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    assert not env_file.exists()
    return port, stderr


def test_a_restarted_chain_comes_back_on_the_port_it_had_unless_told_otherwise(tmp_path: Path) -> None:
    first, _ = _run_once(tmp_path)
    again, _ = _run_once(tmp_path)
    told = free_port()
    moved, _ = _run_once(tmp_path, "--port", str(told))
    kept, _ = _run_once(tmp_path)  # the port asked for stays the choice, across a clean stop
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    elsewhere, _ = _run_once(other_dir)

    assert again == first == home_port(tmp_path / ".devchain.env")
    assert moved == kept == told
    assert elsewhere == home_port(other_dir / ".devchain.env")  # another file, its own home


def test_a_chain_whose_file_was_left_behind_comes_back_on_that_files_port(tmp_path: Path) -> None:
    left = free_port()
    # What a killed chain leaves: its settings, naming a port nothing answers on any more.
    (tmp_path / ".devchain.env").write_text(f"X402_RPC_URL=http://127.0.0.1:{left}\nX402_NETWORK=eip155:1\n")

    port, _ = _run_once(tmp_path)

    assert port == left


def test_a_taken_home_port_is_said_and_a_free_one_used(tmp_path: Path) -> None:
    home = home_port(tmp_path / ".devchain.env")
    with bind_loopback(home) as holder:
        holder.listen()
        port, stderr = _run_once(tmp_path)

    assert port != home
    assert stderr.splitlines()[0] == (
        f"# settings written to .devchain.env (port {home} was taken: this chain is on {port}); "
        "press Ctrl-C to stop"
    )


def test_a_taken_port_asked_for_is_refused_in_one_line_and_nothing_starts(tmp_path: Path) -> None:
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    with bind_loopback(free_port()) as holder:
        holder.listen()
        port = holder.getsockname()[1]
        process = _start(tmp_path, "--port", str(port), tmpdir=temp_root)
        stdout, stderr = process.communicate(timeout=HANG_S)

    assert (process.returncode, stdout) == (2, "")
    assert stderr == f"x402-devchain: --port {port}: that port of 127.0.0.1 is taken; choose another\n"
    assert list(temp_root.iterdir()) == []
    assert not (tmp_path / ".devchain.env").exists()


@pytest.mark.parametrize("port", ["0", "65536", "eight"])
def test_a_port_that_is_no_port_is_refused_in_one_line(port: str, tmp_path: Path) -> None:
    process = _start(tmp_path, "--port", port)
    stdout, stderr = process.communicate(timeout=HANG_S)

    assert (process.returncode, stdout) == (2, "")
    assert stderr.startswith("x402-devchain: Invalid value for '--port'") and stderr.count("\n") == 1, stderr


def _anvil_listening_on(port: int) -> int | None:
    """The pid of the anvil process started with ``--port port``, if one is running (a zombie is not)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # it ended while read
            continue
        if (
            argv[0].endswith(b"anvil")
            and b"--port" in argv
            and argv[argv.index(b"--port") + 1] == str(port).encode()
        ):
            if state != "Z":
                return int(entry.name)
    return None


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's (prctl)")
def test_a_killed_devchain_takes_its_anvil_with_it(tmp_path: Path) -> None:
    # SIGKILL leaves x402-devchain no time to stop anvil, which runs in its own process group.
    env_file, temp_root = tmp_path / "chain.env", tmp_path / "tmp"  # anvil's state, left by a killed owner
    temp_root.mkdir()
    process = _start(tmp_path, "--env-file", str(env_file), tmpdir=temp_root)
    try:
        wait_for_file(env_file, process)
        url = dict(line.split("=", 1) for line in env_file.read_text().splitlines())["X402_RPC_URL"]
        port = int(url.rsplit(":", 1)[1])
        assert _anvil_listening_on(port) is not None
    finally:
        process.kill()
        process.communicate(timeout=HANG_S)

    deadline = time.monotonic() + HANG_S
    while _anvil_listening_on(port) is not None:
        assert time.monotonic() < deadline, f"anvil on port {port} outlived its x402-devchain"
        time.sleep(0.05)
    with pytest.raises(httpx.TransportError), RpcClient(url) as rpc:
        rpc.call("eth_chainId")
