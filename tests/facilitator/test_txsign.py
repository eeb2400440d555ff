"""Our EIP-1559 signing produces exactly eth-account's bytes and hash."""

from __future__ import annotations

import os

import coincurve
from eth_account import Account
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_x402.facilitator._txsign import sign_eip1559

_UINT = st.integers(min_value=0, max_value=2**64)


@settings(max_examples=60, deadline=None)
@given(
    nonce=_UINT,
    gas=st.integers(min_value=21_000, max_value=30_000_000),
    tip=_UINT,
    extra_fee=_UINT,
    data=st.binary(max_size=600),
    value=_UINT,
    chain_id=st.integers(min_value=1, max_value=2**32),
)
def test_signed_bytes_equal_eth_accounts(
    nonce: int, gas: int, tip: int, extra_fee: int, data: bytes, value: int, chain_id: int
) -> None:
    key = os.urandom(32)
    to = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
    expected = Account.from_key(key).sign_transaction(
        {
            "type": 2,
            "chainId": chain_id,
            "nonce": nonce,
            "to": to,
            "data": data,
            "gas": gas,
            "maxFeePerGas": tip + extra_fee,
            "maxPriorityFeePerGas": tip,
            "value": value,
        }
    )

    signed = sign_eip1559(
        coincurve.PrivateKey(key),
        chain_id=chain_id,
        nonce=nonce,
        max_priority_fee_per_gas=tip,
        max_fee_per_gas=tip + extra_fee,
        gas=gas,
        to=to,
        data=data,
        value=value,
    )

    assert signed.raw == bytes(expected.raw_transaction)
    assert signed.hash == bytes(expected.hash)
