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


# Templates, not values: the secrets are made at import, and test ids must be the same in every worker.
@pytest.mark.parametrize(
    "template",
    [
        "relayer_key=0x{key}",
        "input_value='{key_head}...'",
        "key ends with {key_tail}",
        "tx 0x{key} sent",
        "Bearer {token_piece}",
    ],
)
def test_a_printed_piece_of_a_secret_is_found(template: str) -> None:
    printed = template.format(key=KEY, key_head=KEY[:30], key_tail=KEY[-8:], token_piece=TOKEN[5:13])

    with pytest.raises(AssertionError, match="was printed"):
        assert_no_secret([printed], {"relayer key": KEY, "API token": TOKEN})


def test_a_hash_that_shares_eight_digits_with_the_key_by_chance_is_not_a_leak() -> None:
    log = f"settled in {_hash_sharing(KEY[20:28])} at block 7"

    assert_no_secret([log], {"relayer key": KEY})
