"""The distribution as a user gets it: the wheel built from this checkout, installed into a fresh virtualenv,
run beside a user project whose own `cli/`, `storage.py`, `migrations/` and `demo.py` come first on
`sys.path`: a dev chain, a merchant and a payment, completed and booked; `mypy --strict` on a user file
typed against the installed package; the wheel's one top-level name; and, with no anvil anywhere, one line
saying how to get it.

The fresh virtualenv takes the third-party dependencies from this interpreter's site-packages through a
`.pth` file of path lines (which, unlike the site-packages it names, processes none of their `.pth` files:
this checkout's editable install stays out), so nothing is downloaded, and `a2a_x402` comes only from the
wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from a2a_x402.devchain._binary import ANVIL_VERSION, find_anvil
from tests.fixtures.servers import free_port, wait_answering_blocking

ROOT = Path(__file__).resolve().parent.parent
PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"  # anvil's dev account 9
PRICE_ATOMIC = 7_000
# Hang guards, not speed checks: a cold `mypy --strict` of the package takes ~8 s on a quiet machine and
# several times that beside other work.
_TIMEOUT_S = 240
pytestmark = pytest.mark.timeout(900)

# The user's own modules, named as ours were before they moved under `a2a_x402`: each defines something that
# would break a command importing it in place of ours.
USER_PROJECT = {
    "cli/__init__.py": 'OWNER = "user"\n\n\ndef main() -> None:\n    raise SystemExit("the user\'s cli")\n',
    "storage.py": 'OWNER = "user"\ncreate_engine = None\nupgrade_schema = None\n',
    "migrations/__init__.py": 'OWNER = "user"\nraise_on_import = False\n',
    "demo.py": 'OWNER = "user"\nmain = None\n',
}
PAY_SCRIPT = """\
from __future__ import annotations

import asyncio
import json
import os
import sys

import cli
import demo
import migrations
import storage
from a2a.types import TaskState

import a2a_x402
from a2a_x402.payer import Payer


async def main() -> None:
    async with await Payer.connect(sys.argv[1], os.environ["X402_PAYER_KEY"]) as payer:
        result = await payer.pay("Count my words, please.")
    print(json.dumps({
        "own": [module.OWNER for module in (cli, demo, migrations, storage)],
        "package": a2a_x402.__file__,
        "state": TaskState.Name(result.state),
        "task": result.task_id,
        "tx": result.receipts[-1].transaction,
    }))


asyncio.run(main())
"""
TYPED_USER_FILE = """\
from __future__ import annotations

from a2a_x402.merchant.payments import Pricing
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.payer import PaidResult, Payer, PaymentPolicy


async def pay(card_url: str, key: str, cap: int) -> PaidResult:
    async with await Payer.connect(card_url, key, policy=PaymentPolicy(max_amount_atomic=cap)) as payer:
        return await payer.pay("Count my words.")


def price(pricing: Pricing, settings: MerchantSettings) -> int:
    return pricing.price("", "text-stats") + settings.port
"""


@dataclass(frozen=True)
class Installed:
    """The wheel and the fresh virtualenv it is installed in."""

    wheel: Path
    venv: Path
    site_packages: Path

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def _run(
    command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreters and console scripts
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    )


def _checked(command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = _run(command, cwd=cwd, env=env)
    assert done.returncode == 0, f"{command[0]} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes build/ and *.egg-info into the tree it builds.
    source = work / "source"
    source.mkdir()
    shutil.copytree(ROOT / "a2a_x402", source / "a2a_x402", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    dist = work / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _checked([*pip, "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(dist), str(source)])
    (wheel,) = dist.glob("a2a_x402_merchant-*.whl")

    venv = work / "venv"
    _checked([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    site_packages = Path(
        _checked([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip()
    )
    dependencies = [
        entry for entry in sys.path if Path(entry).name == "site-packages" and Path(entry).is_dir()
    ]
    (site_packages / "dependencies.pth").write_text("".join(f"{entry}\n" for entry in dependencies))
    _checked([*pip, "--python", python, "install", "--no-deps", "--no-index", "--quiet", str(wheel)])
    return Installed(wheel, venv, site_packages)


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    for name, text in USER_PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    return project


def _user_env(project: Path, path: str) -> dict[str, str]:
    """A user's shell in `project`: their modules first on sys.path, no X402_* setting of ours leaking in."""
    kept = {key: value for key, value in os.environ.items() if not key.startswith(("X402_", "PYTHON"))}
    return {**kept, "PATH": path, "PYTHONPATH": str(project)}


def test_the_wheel_installs_one_top_level_name_with_its_type_marker(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        (record,) = (name for name in names if name.endswith(".dist-info/RECORD"))
        recorded = [row.split(",", 1)[0] for row in wheel.read(record).decode().splitlines() if row]
        (top_level,) = (name for name in names if name.endswith(".dist-info/top_level.txt"))
        declared = wheel.read(top_level).decode().split()

    assert {name.split("/")[0] for name in recorded if ".dist-info/" not in name} == {"a2a_x402"}
    assert sorted(recorded) == sorted(names)
    assert declared == ["a2a_x402"]
    assert "a2a_x402/py.typed" in names


def test_the_package_comes_from_the_fresh_virtualenv_not_the_checkout(
    installed: Installed, user_project: Path
) -> None:
    where = _checked(
        [installed.bin("python"), "-c", "import a2a_x402, cli; print(a2a_x402.__file__); print(cli.OWNER)"],
        cwd=user_project,
        env=_user_env(user_project, os.environ["PATH"]),
    ).split()

    assert Path(where[0]) == installed.site_packages / "a2a_x402" / "__init__.py"
    assert where[1] == "user"


def _settings(env_file: Path, chain: subprocess.Popen[bytes], log: Path) -> dict[str, str]:
    deadline = time.monotonic() + _TIMEOUT_S
    while not env_file.exists() or "X402_ASSET=" not in env_file.read_text():
        assert chain.poll() is None, f"x402-devchain exited with {chain.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"x402-devchain wrote no settings:\n{log.read_text()}"
        time.sleep(0.05)
    return dict(line.split("=", 1) for line in env_file.read_text().splitlines())


@contextmanager
def _serving(
    command: list[str], *, cwd: Path, env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A long-running command of the fresh virtualenv, interrupted (then killed if it lingers) at the end."""
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - the fresh virtualenv's console scripts
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_a_payment_beside_a_user_project_completes_and_is_booked(
    installed: Installed, user_project: Path, tmp_path: Path
) -> None:
    # No checkout beside the package, so no node_modules: the dev chain runs the anvil on PATH.
    on_path = tmp_path / "tools"
    on_path.mkdir()
    (on_path / "anvil").symlink_to(find_anvil())
    env = _user_env(user_project, f"{on_path}{os.pathsep}{os.environ['PATH']}")
    (user_project / "pay.py").write_text(PAY_SCRIPT)
    chain_log, merchant_log = tmp_path / "devchain.log", tmp_path / "merchant.log"

    devchain = [installed.bin("x402-devchain"), "--payers", "1", "--block-time", "0"]
    with _serving(devchain, cwd=user_project, env=env, log=chain_log) as chain:
        settings = _settings(user_project / ".devchain.env", chain, chain_log)
        merchant_env = {
            **env,
            **settings,
            "X402_PAY_TO": PAY_TO,
            "X402_PRICE": str(PRICE_ATOMIC),
            "X402_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'x402.db'}",
        }
        _checked([installed.bin("x402-merchant"), "db", "upgrade"], cwd=user_project, env=merchant_env)
        port = free_port()
        serve = [installed.bin("x402-merchant"), "serve", "--port", str(port)]
        with _serving(serve, cwd=user_project, env=merchant_env, log=merchant_log) as merchant:
            merchant_url = f"http://127.0.0.1:{port}"
            wait_answering_blocking(
                f"{merchant_url}/healthz",
                running=lambda: merchant.poll() is None,
                what="x402-merchant serve",
                log=merchant_log.read_text,
            )
            payer_env = {**env, "X402_PAYER_KEY": settings["X402_PAYER_KEYS"].split(",")[0]}
            paid = json.loads(
                _checked([installed.bin("python"), "pay.py", merchant_url], cwd=user_project, env=payer_env)
            )
        statement = json.loads(
            _checked(
                [installed.bin("x402-merchant"), "ledger", "statement", "--format", "json"],
                cwd=user_project,
                env=merchant_env,
            )
        )

    assert paid["own"] == ["user"] * 4  # the user's modules, imported beside ours
    assert Path(paid["package"]).is_relative_to(installed.site_packages)
    assert paid["state"] == "TASK_STATE_COMPLETED"
    (line,) = statement["lines"]
    assert (line["taskId"], line["txHash"], line["amount"], line["status"]) == (
        paid["task"],
        paid["tx"],
        str(PRICE_ATOMIC),
        "settled",
    ), line


@pytest.mark.parametrize("command", ["x402-devchain", "x402-demo"])
def test_with_no_anvil_anywhere_a_command_says_in_one_line_how_to_get_it(
    command: str, installed: Installed, user_project: Path, tmp_path: Path
) -> None:
    nothing = tmp_path / "empty-path"
    nothing.mkdir()

    done = _run([installed.bin(command)], cwd=user_project, env=_user_env(user_project, str(nothing)))

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"{command}: anvil not found on PATH: install it with "
        f"`npm install -g @foundry-rs/anvil@{ANVIL_VERSION}` (or Foundry's foundryup), "
        "or set X402_ANVIL_BIN to its path\n"
    )
    assert not (user_project / ".devchain.env").exists()


def test_mypy_strict_types_a_user_file_against_the_installed_package(
    installed: Installed, user_project: Path
) -> None:
    (user_project / "app.py").write_text(TYPED_USER_FILE)
    (user_project / "wrong.py").write_text(
        "from a2a_x402.payer import PaymentPolicy\n\ncap: str = PaymentPolicy().max_amount_atomic\n"
    )
    mypy = [
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--python-executable",
        installed.bin("python"),
        "--cache-dir",
        str(user_project / ".mypy_cache"),
    ]
    env = _user_env(user_project, os.environ["PATH"])

    typed = _run([*mypy, "app.py"], cwd=user_project, env=env)
    wrong = _run([*mypy, "wrong.py"], cwd=user_project, env=env)

    assert (typed.returncode, typed.stdout) == (0, "Success: no issues found in 1 source file\n"), (
        typed.stderr
    )
    # The installed package's types reach the user's code: a mistake against them is found.
    assert wrong.returncode == 1
    assert wrong.stdout.splitlines()[0] == (
        'wrong.py:3: error: Incompatible types in assignment (expression has type "int | None", '
        'variable has type "str")  [assignment]'
    )
