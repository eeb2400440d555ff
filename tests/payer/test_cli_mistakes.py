"""`x402-pay` and `x402-devchain` refuse their user's mistakes in one line (exit 2, no traceback), printing no
secret (real processes)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.commands import Secrets, Snapshot, assert_mistake, run_command


async def test_pay_without_a_key(tmp_path: Path, known_secrets: Secrets) -> None:
    before = Snapshot(tmp_path)
    answer = await run_command(["x402-pay", "--card-url", "http://127.0.0.1:1", "hello"], cwd=tmp_path)
    assert_mistake(answer, "x402-pay: no key: use --key-file, --key, X402_PAYER_KEY", secrets_=known_secrets)
    before.assert_unchanged()


async def test_pay_with_a_key_that_is_no_key(tmp_path: Path, known_secrets: Secrets) -> None:
    answer = await run_command(
        ["x402-pay", "--card-url", "http://127.0.0.1:1", "hello"],
        cwd=tmp_path,
        env={"X402_PAYER_KEY": known_secrets.api_token},
    )
    assert_mistake(answer, "x402-pay: the payer's key is not 32 bytes of hex", secrets_=known_secrets)


async def test_pay_with_a_missing_key_file(tmp_path: Path, known_secrets: Secrets) -> None:
    answer = await run_command(
        ["x402-pay", "--key-file", "missing.key", "--card-url", "http://127.0.0.1:1", "hello"], cwd=tmp_path
    )
    assert_mistake(answer, "x402-pay: Invalid value for '--key-file'", "(see x402-pay --help)")


async def test_devchain_with_a_bad_option(tmp_path: Path, known_secrets: Secrets) -> None:
    before = Snapshot(tmp_path)
    answer = await run_command(["x402-devchain", "--payers", "-1"], cwd=tmp_path)
    assert_mistake(answer, "x402-devchain: Invalid value for '--payers'", secrets_=known_secrets)
    before.assert_unchanged()
