"""The EIP-712 domains (name, version) of the tokens verification has read, checked against the terms."""

from __future__ import annotations

from eth_abi.exceptions import DecodingError

from ._errors import PaymentInvalidError, RpcError
from ._gas import is_contract
from ._token import decode_string
from .wire import Reason

__all__ = ["TokenDomains"]


class TokenDomains:
    """Each token's (name, version), learned from its first answer. Safe for concurrent use."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, str]] = {}

    def __contains__(self, asset: object) -> bool:
        return asset in self._known

    def learn(self, asset: str, name: str, version: str, replies: tuple[object, object, object]) -> None:
        """Check the token's code, name() and version() `replies`, remember them, and compare `name` and
        `version` (the terms' `extra`) with them.

        Raises:
            PaymentInvalidError: the asset has no code or no usable domain, or the terms name another.
        """
        code, name_reply, version_reply = replies
        if isinstance(code, RpcError) or not is_contract(code):
            raise PaymentInvalidError(
                Reason.ASSET_NOT_DEPLOYED_CONTRACT, f"the asset {asset} has no contract code"
            )
        token_name, token_version = _string_result(name_reply), _string_result(version_reply)
        if token_name is None or token_version is None:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_EIP3009_NOT_SUPPORTED, "the asset has no usable name()/version()"
            )
        # Only a token that answered is cached: its EIP-712 domain cannot change under the same address.
        self._known[asset] = (token_name, token_version)
        self.compare(asset, name, version)

    def compare(self, asset: str, name: str, version: str) -> None:
        """Compare `extra.name`/`extra.version` with the token's, when the token's domain is known.

        Raises:
            PaymentInvalidError: they differ.
        """
        actual = self._known.get(asset)
        if actual is None:
            return
        if name != actual[0]:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_TOKEN_NAME_MISMATCH,
                f"extra.name is not the token's name {actual[0]!r}",
            )
        if version != actual[1]:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_TOKEN_VERSION_MISMATCH,
                f"extra.version is not the token's version {actual[1]!r}",
            )


def _string_result(reply: object) -> str | None:
    """The string an eth_call returned, or None for a revert or a result that is not an ABI string."""
    if not isinstance(reply, str):
        return None
    try:
        return decode_string(reply)
    except (DecodingError, ValueError):
        return None
