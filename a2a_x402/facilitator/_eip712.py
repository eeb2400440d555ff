"""EIP-712 digests of EIP-3009 authorizations, with the domain separator cached per token."""

from __future__ import annotations

from functools import lru_cache

from eth_abi.abi import encode as abi_encode
from eth_utils.crypto import keccak

from ._token import Authorization, address_word, bytes32_word, uint_word

__all__ = ["TRANSFER_WITH_AUTHORIZATION_TYPEHASH", "authorization_digest", "domain_separator"]

_DOMAIN_TYPEHASH = keccak(
    text="EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak(
    text="TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,"
    "uint256 validBefore,bytes32 nonce)"
)


@lru_cache(maxsize=256)
def domain_separator(name: str, version: str, chain_id: int, verifying_contract: str) -> bytes:
    """The EIP-712 domain separator of a token, as USDC v2.2 computes it."""
    return keccak(
        abi_encode(
            ["bytes32", "bytes32", "bytes32", "uint256", "address"],
            [_DOMAIN_TYPEHASH, keccak(text=name), keccak(text=version), chain_id, verifying_contract],
        )
    )


def authorization_digest(auth: Authorization, *, name: str, version: str, chain_id: int, asset: str) -> bytes:
    """The 32-byte digest the payer signed for `auth` under the token's domain."""
    # Fixed-size words only, so encoded by hand (eth-abi's generic encoder cost more than the two hashes).
    struct_hash = keccak(
        b"".join(
            (
                TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
                address_word(auth.from_),
                address_word(auth.to),
                uint_word(auth.value),
                uint_word(auth.valid_after),
                uint_word(auth.valid_before),
                bytes32_word(auth.nonce),
            )
        )
    )
    return keccak(b"\x19\x01" + domain_separator(name, version, chain_id, asset) + struct_hash)
