"""`x402-pay` and `x402-devchain` refuse their user's mistakes in one line (exit 2, no traceback), creating
and changing nothing, printing no secret (real processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.commands import Secrets, assert_refused

_PAY = ("--card-url", "http://127.0.0.1:1", "hello")


async def test_pay_without_a_key(workdir: Path, known_secrets: Secrets) -> None:
    await assert_refused(
        "x402-pay",
        _PAY,
        {},
        workdir,
        known_secrets,
        "x402-pay: no key: use --key-file, --key, X402_PAYER_KEY",
    )


async def test_pay_with_a_key_that_is_no_key(workdir: Path, known_secrets: Secrets) -> None:
    await assert_refused(
        "x402-pay",
        _PAY,
        {"X402_PAYER_KEY": known_secrets.api_token},
        workdir,
        known_secrets,
        "x402-pay: the payer's key is not 32 bytes of hex",
    )


async def test_pay_with_a_first_devchain_key_that_is_no_key_names_where_it_came_from(
    workdir: Path, known_secrets: Secrets
) -> None:
    await assert_refused(
        "x402-pay",
        _PAY,
        {"X402_PAYER_KEYS": f"{known_secrets.api_token},0x{'11' * 32}"},
        workdir,
        known_secrets,
        "x402-pay: the payer's key is not 32 bytes of hex",
        "the first of X402_PAYER_KEYS",
    )


async def test_pay_with_a_missing_key_file(workdir: Path, known_secrets: Secrets) -> None:
    await assert_refused(
        "x402-pay",
        ["--key-file", "missing.key", *_PAY],
        {},
        workdir,
        known_secrets,
        "x402-pay: Invalid value for '--key-file'",
        "(see x402-pay --help)",
    )


@pytest.mark.parametrize(
    "card_url",
    ["not-a-url", "ftp://127.0.0.1/card.json", "http://", "http://127.0.0.1:99999", "127.0.0.1:8000"],
)
async def test_pay_with_a_card_url_that_is_no_url(
    workdir: Path, known_secrets: Secrets, card_url: str
) -> None:
    # Refused as an option before anything else: no key is needed to see it, and no request is made.
    await assert_refused(
        "x402-pay",
        ["--card-url", card_url, "hello"],
        {},
        workdir,
        known_secrets,
        "x402-pay: Invalid value for '--card-url': the card URL must be an absolute http(s) URL",
        repr(card_url),
    )


async def test_devchain_with_a_bad_option(workdir: Path, known_secrets: Secrets) -> None:
    await assert_refused(
        "x402-devchain",
        ["--payers", "-1"],
        {},
        workdir,
        known_secrets,
        "x402-devchain: Invalid value for '--payers'",
    )
