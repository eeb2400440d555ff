"""`SignatureMemo` gives exactly what the digest and recovery functions give, for any authorization."""

from __future__ import annotations

import dataclasses

from eth_account import Account

from a2a_x402.facilitator._eip712 import authorization_digest
from a2a_x402.facilitator._signature import recover_signer
from a2a_x402.facilitator._signed import SignatureMemo
from a2a_x402.facilitator._token import Authorization

_ASSET = "0x" + "11" * 20


def _digest(auth: Authorization, version: str = "2") -> bytes:
    return authorization_digest(auth, name="USD Coin", version=version, chain_id=31337, asset=_ASSET)


def _remembered(memo: SignatureMemo, auth: Authorization, version: str = "2") -> bytes:
    return memo.digest(auth, name="USD Coin", version=version, chain_id=31337, asset=_ASSET)


def _signed(key: bytes, nonce: int) -> Authorization:
    unsigned = Authorization(
        from_=Account.from_key(key).address,
        to="0x" + "22" * 20,
        value=1000,
        valid_after=0,
        valid_before=2**40,
        nonce=nonce.to_bytes(32, "big"),
        signature=b"",
    )
    signature = Account.unsafe_sign_hash(_digest(unsigned), key).signature
    return dataclasses.replace(unsigned, signature=bytes(signature))


def test_the_memo_answers_as_the_functions_do_again_and_again() -> None:
    memo = SignatureMemo()
    first, second = _signed(b"\x01" * 32, 1), _signed(b"\x02" * 32, 2)
    for _ in range(2):  # computed, then remembered
        for auth in (first, second):
            digest = _remembered(memo, auth)
            assert digest == _digest(auth)
            assert memo.signer(digest, auth.signature) == recover_signer(digest, auth.signature) == auth.from_
    assert _remembered(memo, first, version="1") == _digest(first, version="1") != _digest(first)
    # Another signature over the same digest is recovered on its own, never taken from the memo.
    digest = _remembered(memo, first)
    assert memo.signer(digest, second.signature) not in (None, first.from_)
    assert memo.signer(digest, b"\x00" * 65) is None


def test_the_memo_keeps_no_signature_a_payer_made_large() -> None:
    memo = SignatureMemo()
    auth = dataclasses.replace(
        _signed(b"\x03" * 32, 3), signature=b"\x01" * 40_000
    )  # an ERC-6492 wrapper's size

    digest = _remembered(memo, auth)

    assert digest == _digest(auth)
    assert memo.signer(digest, auth.signature) is None  # not 65 bytes: refused, and not remembered
    kept = [*memo._digests, *memo._signers]
    assert all(len(repr(key)) < 1_000 for key in kept), "a memo key holds the signature"
