"""The token calls, encoded by hand, are exactly eth-abi's encoding of the same values."""

from __future__ import annotations

from eth_abi.abi import encode as abi_encode
from eth_utils.crypto import keccak
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_x402.facilitator._eip712 import (
    TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
    authorization_digest,
    domain_separator,
)
from a2a_x402.facilitator._token import (
    Authorization,
    encode_authorization_state,
    encode_balance_of,
    encode_is_blacklisted,
    encode_is_valid_signature,
    encode_transfer_with_authorization,
)
from a2a_x402.facilitator.wire import checksum_address

_ADDRESS = st.binary(min_size=20, max_size=20).map(lambda raw: checksum_address("0x" + raw.hex()))
_UINT = st.integers(min_value=0, max_value=2**256 - 1)
_WORD = st.binary(min_size=32, max_size=32)


def _tail(calldata: str) -> bytes:
    """The arguments of a call: the calldata after its 4-byte selector."""
    return bytes.fromhex(calldata[2 + 8 :])


@st.composite
def _authorizations(draw: st.DrawFn) -> Authorization:
    signature = draw(st.one_of(st.binary(min_size=65, max_size=65), st.binary(max_size=300)))
    return Authorization(
        from_=draw(_ADDRESS),
        to=draw(_ADDRESS),
        value=draw(_UINT),
        valid_after=draw(_UINT),
        valid_before=draw(_UINT),
        nonce=draw(_WORD),
        signature=signature,
    )


@settings(max_examples=80, deadline=None)
@given(auth=_authorizations())
def test_transfer_with_authorization_matches_eth_abi(auth: Authorization) -> None:
    head = [auth.from_, auth.to, auth.value, auth.valid_after, auth.valid_before, auth.nonce]
    types = ["address", "address", "uint256", "uint256", "uint256", "bytes32"]
    sig = auth.signature
    if len(sig) == 65:
        v = sig[64] if sig[64] >= 27 else sig[64] + 27
        expected = abi_encode([*types, "uint8", "bytes32", "bytes32"], [*head, v, sig[:32], sig[32:64]])
    else:
        expected = abi_encode([*types, "bytes"], [*head, sig])
    assert _tail(encode_transfer_with_authorization(auth)) == expected


@settings(max_examples=40, deadline=None)
@given(account=_ADDRESS, nonce=_WORD, digest=_WORD, signature=st.binary(max_size=300))
def test_reads_match_eth_abi(account: str, nonce: bytes, digest: bytes, signature: bytes) -> None:
    assert _tail(encode_balance_of(account)) == abi_encode(["address"], [account])
    assert _tail(encode_is_blacklisted(account)) == abi_encode(["address"], [account])
    assert _tail(encode_authorization_state(account, nonce)) == abi_encode(
        ["address", "bytes32"], [account, nonce]
    )
    assert _tail(encode_is_valid_signature(digest, signature)) == abi_encode(
        ["bytes32", "bytes"], [digest, signature]
    )


@settings(max_examples=40, deadline=None)
@given(auth=_authorizations(), asset=_ADDRESS, chain_id=st.integers(min_value=1, max_value=2**64))
def test_digest_matches_eth_abi(auth: Authorization, asset: str, chain_id: int) -> None:
    struct_hash = keccak(
        abi_encode(
            ["bytes32", "address", "address", "uint256", "uint256", "uint256", "bytes32"],
            [
                TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
                auth.from_,
                auth.to,
                auth.value,
                auth.valid_after,
                auth.valid_before,
                auth.nonce,
            ],
        )
    )
    expected = keccak(b"\x19\x01" + domain_separator("USDC", "2", chain_id, asset) + struct_hash)
    assert authorization_digest(auth, name="USDC", version="2", chain_id=chain_id, asset=asset) == expected
