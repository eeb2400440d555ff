"""secp256k1 signature recovery with the same acceptance rules as the token's EOA path."""

from __future__ import annotations

import coincurve
from eth_utils.crypto import keccak

from .wire import checksum_address

__all__ = ["recover_signer"]

_SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def recover_signer(digest: bytes, signature: bytes) -> str | None:
    """The checksummed address that signed `digest`, or None if `signature` is not an acceptable one.

    Accepts only what USDC's ECRecover accepts: 65 bytes r‖s‖v with v in {27, 28} (0/1 tolerated, as
    the token's v,r,s overload is called with v normalised), low-s, and r, s in range.
    """
    if len(signature) != 65:
        return None
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    v = signature[64]
    if v in (0, 1):
        v += 27
    if v not in (27, 28) or not 0 < r < _SECP256K1_N or not 0 < s <= _SECP256K1_N // 2:
        return None
    try:
        public_key = coincurve.PublicKey.from_signature_and_message(
            signature[:64] + bytes([v - 27]), digest, hasher=None
        )
    except ValueError:
        return None
    return checksum_address("0x" + keccak(public_key.format(compressed=False)[1:])[-20:].hex())
