"""EIP-712 digests of Permit2 witness transfers and who signed them: pure math, no chain.

A payer of x402's `exact` scheme by Permit2, or of its `upto` scheme, signs Permit2's
`PermitWitnessTransferFrom` (the token and amount permitted, the spender, a nonce, a deadline and a witness)
under Permit2's domain, which has a name, a chain id and a verifying contract but no version. Permit2 hashes
the message with its caller as the spender, so only the x402 proxy named as spender can move the funds, and
the proxy checks the witness (`to`, `validAfter`, and for `upto` the `facilitator` that must send the
transaction). The witness type strings are those the two proxies hand to Permit2.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final, TypeAlias

from eth_utils.crypto import keccak

from ._signature import recover_signer
from ._token import address_word, uint_word
from .wire import (
    ExactPermit2Authorization,
    ExactPermit2Witness,
    UptoPermit2Authorization,
    UptoPermit2Witness,
)

__all__ = [
    "EXACT_PERMIT2_PROXY",
    "PERMIT2_ADDRESS",
    "UPTO_PERMIT2_PROXY",
    "Permit2Authorization",
    "permit2_digest",
    "permit2_domain_separator",
    "permit2_signer",
]

# Permit2 and the two x402 proxies are deployed with CREATE2 at the same address on every chain.
PERMIT2_ADDRESS: Final = "0x000000000022D473030F116dDEE9F6B43aC78BA3"
EXACT_PERMIT2_PROXY: Final = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
UPTO_PERMIT2_PROXY: Final = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002"

# Either scheme's message; the witness tells them apart.
Permit2Authorization: TypeAlias = ExactPermit2Authorization | UptoPermit2Authorization

_DOMAIN_TYPEHASH: Final = keccak(text="EIP712Domain(string name,uint256 chainId,address verifyingContract)")
_PERMIT2_NAME_HASH: Final = keccak(text="Permit2")
# "token" here is the ERC-20 token, not a credential (ruff's S105 guesses otherwise).
_TOKEN_PERMISSIONS: Final = "TokenPermissions(address token,uint256 amount)"  # noqa: S105
_TOKEN_PERMISSIONS_TYPEHASH: Final = keccak(text=_TOKEN_PERMISSIONS)
_EXACT_WITNESS: Final = "Witness(address to,uint256 validAfter)"
_UPTO_WITNESS: Final = "Witness(address to,address facilitator,uint256 validAfter)"
_EXACT_WITNESS_TYPEHASH: Final = keccak(text=_EXACT_WITNESS)
_UPTO_WITNESS_TYPEHASH: Final = keccak(text=_UPTO_WITNESS)


def _permit_typehash(witness_type: str) -> bytes:
    # EIP-712 appends the referenced struct types sorted by name: TokenPermissions, then Witness.
    return keccak(
        text="PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,"
        "uint256 deadline,Witness witness)" + _TOKEN_PERMISSIONS + witness_type
    )


_EXACT_PERMIT_TYPEHASH: Final = _permit_typehash(_EXACT_WITNESS)
_UPTO_PERMIT_TYPEHASH: Final = _permit_typehash(_UPTO_WITNESS)

# EIP-2098 compact signatures: the top bit of the second word is v - 27, the rest is s.
_COMPACT_BYTES: Final = 64
_S_MASK: Final = (1 << 255) - 1


@lru_cache(maxsize=64)
def permit2_domain_separator(chain_id: int) -> bytes:
    """Permit2's EIP-712 domain separator on `chain_id` (its `DOMAIN_SEPARATOR()`)."""
    return keccak(_DOMAIN_TYPEHASH + _PERMIT2_NAME_HASH + uint_word(chain_id) + address_word(PERMIT2_ADDRESS))


def _witness_hash(witness: ExactPermit2Witness | UptoPermit2Witness) -> bytes:
    if isinstance(witness, UptoPermit2Witness):
        return keccak(
            _UPTO_WITNESS_TYPEHASH
            + address_word(witness.to)
            + address_word(witness.facilitator)
            + uint_word(witness.valid_after)
        )
    return keccak(_EXACT_WITNESS_TYPEHASH + address_word(witness.to) + uint_word(witness.valid_after))


def permit2_digest(authorization: Permit2Authorization, chain_id: int) -> bytes:
    """The 32-byte digest the payer signed for `authorization` on `chain_id`, as Permit2 computes it when
    the spender named in it calls `permitWitnessTransferFrom`."""
    typehash = (
        _UPTO_PERMIT_TYPEHASH
        if isinstance(authorization, UptoPermit2Authorization)
        else _EXACT_PERMIT_TYPEHASH
    )
    permitted = authorization.permitted
    struct_hash = keccak(
        b"".join(
            (
                typehash,
                keccak(
                    _TOKEN_PERMISSIONS_TYPEHASH + address_word(permitted.token) + uint_word(permitted.amount)
                ),
                address_word(authorization.spender),
                uint_word(authorization.nonce),
                uint_word(authorization.deadline),
                _witness_hash(authorization.witness),
            )
        )
    )
    return keccak(b"\x19\x01" + permit2_domain_separator(chain_id) + struct_hash)


def permit2_signer(digest: bytes, signature: bytes) -> str | None:
    """The checksummed address whose key signed `digest`, or None if `signature` is no acceptable ECDSA one.

    Permit2 takes r‖s‖v (65 bytes) and the EIP-2098 compact r‖vs (64 bytes) from an owner without code.
    Unlike Permit2's bare `ecrecover`, a high-s signature is refused: a wallet never makes one, and its
    low-s twin is the one to send.
    """
    if len(signature) == _COMPACT_BYTES:
        vs = int.from_bytes(signature[32:], "big")
        signature = signature[:32] + (vs & _S_MASK).to_bytes(32, "big") + bytes([27 + (vs >> 255)])
    return recover_signer(digest, signature)
