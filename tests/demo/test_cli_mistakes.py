"""`x402-demo` refuses its user's mistakes in one line (exit 2, no traceback), before it starts anything,
creating and changing nothing (real processes)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.commands import Secrets, assert_refused


async def test_an_unknown_option(workdir: Path, known_secrets: Secrets) -> None:
    await assert_refused(
        "x402-demo", ["--stram"], {}, workdir, known_secrets, "x402-demo: No such option '--stram'", "--help"
    )


async def test_two_texts(workdir: Path, known_secrets: Secrets) -> None:
    await assert_refused(
        "x402-demo",
        ["one", "two"],
        {},
        workdir,
        known_secrets,
        "x402-demo: Got unexpected extra argument (two)",
    )


async def test_an_anvil_that_is_not_there(workdir: Path, known_secrets: Secrets) -> None:
    missing = workdir.parent / "no-anvil"
    await assert_refused(
        "x402-demo",
        [],
        {"X402_ANVIL_BIN": str(missing)},
        workdir,
        known_secrets,
        f"x402-demo: X402_ANVIL_BIN={missing} is not a file",
    )
