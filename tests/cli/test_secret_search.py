"""The secret search every mistake and fault test runs: it finds any printed piece of a secret, and a
public hex value that shares a few digits with a key by chance is not one."""

from __future__ import annotations

import secrets

import pytest

from tests.fixtures.commands import assert_no_secret

KEY = secrets.token_hex(32)
TOKEN = secrets.token_urlsafe(32)


def _hash_sharing(piece: str) -> str:
    """A random 64-digit hash with `piece` in its middle (what chance does, 2^-32 a position)."""
    return "0x" + secrets.token_hex(12) + piece + secrets.token_hex(28)[: 64 - 24 - len(piece)]


@pytest.mark.parametrize(
    "printed",
    [
        f"relayer_key=0x{KEY}",
        f"input_value='{KEY[:30]}...'",
        f"key ends with {KEY[-8:]}",
        f"tx 0x{KEY} sent",
        f"Bearer {TOKEN[5:13]}",
    ],
)
def test_a_printed_piece_of_a_secret_is_found(printed: str) -> None:
    with pytest.raises(AssertionError, match="was printed"):
        assert_no_secret([printed], {"relayer key": KEY, "API token": TOKEN})


def test_a_hash_that_shares_eight_digits_with_the_key_by_chance_is_not_a_leak() -> None:
    log = f"settled in {_hash_sharing(KEY[20:28])} at block 7"

    assert_no_secret([log], {"relayer key": KEY})
