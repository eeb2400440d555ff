from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest

from a2a_x402.agentcard import (
    MAX_CARD_BYTES,
    MAX_NESTING,
    CardParseError,
    CardTooLargeError,
    DuplicateKeyError,
    parse_card_json,
)
from tests.agentcard.conftest import merchant_card


def test_a_card_parses_to_the_same_object() -> None:
    card = merchant_card()
    assert parse_card_json(json.dumps(card, ensure_ascii=False).encode()) == card


def test_duplicate_member_is_refused_at_any_depth() -> None:
    with pytest.raises(DuplicateKeyError, match="'name'") as raised:
        parse_card_json(b'{"name": "a", "description": "", "name": "b"}')
    assert raised.value.code == "card_duplicate_key"
    with pytest.raises(DuplicateKeyError, match="'streaming'"):
        parse_card_json(b'{"capabilities": {"streaming": true, "streaming": false}}')


class _WatchedBytes(bytes):
    """Bytes that count how often they are decoded: decoding is the first step of parsing."""

    def __init__(self, _: bytes) -> None:
        self.decodes = 0

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        self.decodes += 1
        return super().decode(encoding, errors)


def test_ten_megabyte_card_is_refused_by_size_before_parsing() -> None:
    # Not JSON at all: only a size check that runs before parsing can report "too large" for it.
    body = _WatchedBytes(b"{" + b"x" * (10 * 1024 * 1024))
    with pytest.raises(CardTooLargeError, match="over the limit of 262144") as raised:
        parse_card_json(body)
    assert raised.value.code == "card_too_large"
    assert body.decodes == 0  # refused on its length alone: not a byte of it was decoded

    small = _WatchedBytes(b'{"name": "a"}')
    assert parse_card_json(small) == {"name": "a"}
    assert small.decodes == 1  # the count does see a decode


def test_size_limit_is_inclusive_and_configurable() -> None:
    body = b'{"pad": "' + b"x" * (MAX_CARD_BYTES - 11) + b'"}'
    assert len(body) == MAX_CARD_BYTES
    assert parse_card_json(body)["pad"]
    with pytest.raises(CardTooLargeError):
        parse_card_json(body + b" ")
    with pytest.raises(CardTooLargeError):
        parse_card_json(b'{"a": 1}', max_bytes=7)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"name": ', "not JSON"),
        (b"[]", "must be a JSON object, got list"),
        (b'"card"', "must be a JSON object, got str"),
        (b'{"x": NaN}', "NaN is not a JSON number"),
        (b'{"x": -Infinity}', "-Infinity is not a JSON number"),
        (b'{"x": 1e400}', "1e400 is out of the range"),
        (b'{"x": ' + b"9" * 5000 + b"}", "number Python cannot read"),
        (b"\xef\xbb\xbf{}", "not JSON"),
    ],
    ids=["not-utf8", "truncated", "array", "string", "nan", "infinity", "overflow", "5000-digits", "bom"],
)
def test_malformed_bodies_are_refused_with_a_reason(body: bytes, message: str) -> None:
    with pytest.raises(CardParseError, match=message) as raised:
        parse_card_json(body, max_bytes=1 << 20)
    assert raised.value.code in {"card_parse_error", "card_duplicate_key"}


def test_parse_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        parse_card_json(b"nope")


@pytest.fixture
def raised_recursion_limit() -> Iterator[None]:
    """The limit py_ecc (imported by web3/eth-account) sets process-wide, under which json.loads of deep
    input overflows the C stack instead of raising RecursionError."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


@pytest.mark.usefixtures("raised_recursion_limit")
def test_deep_nesting_is_refused_before_parsing_even_with_a_raised_recursion_limit() -> None:
    with pytest.raises(CardParseError, match="nested more than 128 levels"):
        parse_card_json(b"[" * 100_000 + b"]" * 100_000, max_bytes=1 << 20)
    with pytest.raises(CardParseError, match="nested more than 128 levels"):
        parse_card_json(b'{"a":' * 200_000 + b"1" + b"}" * 200_000, max_bytes=1 << 21)


def test_nesting_limit_counts_containers_not_brackets_in_strings() -> None:
    assert MAX_NESTING == 128
    deepest = b'{"a":' * (MAX_NESTING - 1) + b"[]" + b"}" * (MAX_NESTING - 1)
    assert parse_card_json(deepest)
    with pytest.raises(CardParseError):
        parse_card_json(b'{"a":' * MAX_NESTING + b"[]" + b"}" * MAX_NESTING)
    brackets_in_text = {"s": "[" * 1000 + '\\"{' * 500, "t": ["]]]"]}
    assert parse_card_json(json.dumps(brackets_in_text).encode()) == brackets_in_text


def test_a_full_size_card_with_brackets_and_escaped_quotes_in_its_strings_parses() -> None:
    # How long it takes, and how that grows with the card's size, is measured by bench.agentcard_bench.
    card = {"skills": [{"id": str(i), "name": 'n\\"[{', "tags": ["t"] * 20} for i in range(1000)]}
    body = json.dumps(card).encode()
    assert MAX_CARD_BYTES // 2 < len(body) < MAX_CARD_BYTES
    assert parse_card_json(body) == card
