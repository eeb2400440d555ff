"""Only the wrappers import the AP2 SDK (and its sd-jwt and jwcrypto), so no SDK type or file log escapes;
without the SDK, the wrapper refuses mandates as not supported instead of failing."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import a2a_x402
from tests.fixtures.deadlines import HANG_S

# The merchant's, the payer's and the conformance kit's wrappers (docs/design/ap2-embedded.md).
_WRAPPERS = {"merchant/ap2/_sdk.py", "payer/_ap2_sdk.py", "conformance/_ap2_sdk.py"}
_SDK_ROOTS = {"ap2", "sd_jwt", "jwcrypto"}


def test_only_the_wrappers_import_the_ap2_sdk() -> None:
    package = pathlib.Path(a2a_x402.__file__).parent
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.split(".")[0] in _SDK_ROOTS for name in names):
                importers.add(path.relative_to(package).as_posix())
    assert importers <= _WRAPPERS
    assert "merchant/ap2/_sdk.py" in importers


_WITHOUT_SDK = """\
import sys

sys.modules["ap2"] = None  # as if it were not installed
from a2a_x402.merchant.ap2 import IssuerKeys, MandateKind, MandateRefused, ap2_sdk_available, verify_mandate

print(ap2_sdk_available())
try:
    verify_mandate(MandateKind.PAYMENT, "a.b.c~~d.e.f~", IssuerKeys({}), audience="m", nonce="n", now=0)
except MandateRefused as refused:
    print(refused)
"""


def test_without_the_sdk_mandates_are_refused_as_not_supported() -> None:
    completed = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-c", _WITHOUT_SDK], capture_output=True, text=True, timeout=HANG_S, check=True
    )
    assert completed.stdout.splitlines() == [
        "False",
        "mandates_not_supported: the AP2 SDK is not installed (scripts/setup installs it)",
    ]


_KIT_WITHOUT_SDK = """\
import sys

sys.modules["ap2"] = None  # as if it were not installed
import a2a_x402.conformance
from a2a_x402.conformance._ap2_sdk import sdk_problem

print(sdk_problem())
"""


def test_without_the_sdk_the_kit_runs_and_names_what_to_install() -> None:
    completed = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-c", _KIT_WITHOUT_SDK], capture_output=True, text=True, timeout=HANG_S, check=True
    )
    [line] = completed.stdout.splitlines()
    assert line.startswith("the AP2 SDK is not installed: install it with `pip install --no-deps`"), line
