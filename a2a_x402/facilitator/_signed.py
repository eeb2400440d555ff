"""The EIP-712 digest of an authorization and who signed it, remembered for the payments just seen.

A payment is verified twice in one process when the merchant runs the facilitator in process: before
the paid work (so nothing is done for a payment the chain would refuse) and again by its settle, which
must check everything anew because the chain may have moved meanwhile. The digest and the signer it
recovers to are pure functions of the authorization and the terms, so the second time they come from
here; every check that depends on the moment or on the chain still runs each time.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import TYPE_CHECKING, TypeVar

from ._eip712 import authorization_digest
from ._signature import recover_signer

if TYPE_CHECKING:
    from ._token import Authorization

__all__ = ["SignatureMemo"]

_K = TypeVar("_K")
_V = TypeVar("_V")
# Enough for every payment between a verify and its settle at any load one process takes.
_KEPT = 4096
_SIGNATURE_BYTES = 65


class SignatureMemo:
    """Digests and recovered signers of recently checked authorizations (bounded, least recent dropped)."""

    def __init__(self) -> None:
        self._digests: OrderedDict[tuple[Authorization, str, str, int, str], bytes] = OrderedDict()
        self._signers: OrderedDict[tuple[bytes, bytes], str | None] = OrderedDict()

    def digest(self, auth: Authorization, *, name: str, version: str, chain_id: int, asset: str) -> bytes:
        """`authorization_digest`: what `auth` signs under the token's EIP-712 domain."""
        # The digest does not cover the signature, which a payer may make large (an ERC-6492 wrapper):
        # kept out of the key, it costs no memory here.
        key = (dataclasses.replace(auth, signature=b""), name, version, chain_id, asset)
        digest = self._digests.get(key)
        if digest is None:
            digest = authorization_digest(auth, name=name, version=version, chain_id=chain_id, asset=asset)
            _keep(self._digests, key, digest)
        return digest

    def signer(self, digest: bytes, signature: bytes) -> str | None:
        """`recover_signer(digest, signature)`."""
        if len(signature) != _SIGNATURE_BYTES:
            return recover_signer(digest, signature)  # refused at once: nothing worth remembering
        key = (digest, signature)
        if key in self._signers:
            return self._signers[key]
        signer = recover_signer(digest, signature)
        _keep(self._signers, key, signer)
        return signer


def _keep(memo: OrderedDict[_K, _V], key: _K, value: _V) -> None:
    memo[key] = value
    if len(memo) > _KEPT:
        memo.popitem(last=False)
