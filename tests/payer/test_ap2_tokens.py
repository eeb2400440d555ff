"""`_ap2_tokens`: a hostile merchant's token is refused in one typed error, however it is malformed."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator

import pytest

from a2a_x402.payer import MandateConstraintError
from a2a_x402.payer._ap2_tokens import jwt_claims


def _segment(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.fixture
def default_recursion_limit() -> Iterator[None]:
    """Python's own limit, 1000: a process that imports eth_account has py_ecc's 100,000 instead, under which
    this nesting would not overflow, and the defence must hold in either."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(previous)


@pytest.mark.usefixtures("default_recursion_limit")
@pytest.mark.parametrize(
    "claims",
    [
        b"[" * 3000,  # nested deeper than Python's recursion limit
        b"not json",
        b'["a list"]',
    ],
    ids=["nested", "not-json", "not-an-object"],
)
def test_a_malformed_claims_segment_is_one_typed_error(claims: bytes) -> None:
    token = f"{_segment(b'{}')}.{_segment(claims)}.c2ln"
    with pytest.raises(MandateConstraintError) as refused:
        jwt_claims(token, "the checkout JWT")
    assert "the checkout JWT" in str(refused.value) and "\n" not in str(refused.value)
