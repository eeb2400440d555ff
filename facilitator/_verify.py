"""Verification of an exact-scheme EIP-3009 payment against the terms the merchant offered.

Cheap checks run first and need no chain access (fields, amounts, times, signature recovery); the chain
reads that remain (token domain, asset code, authorization state, balance, a simulation of the transfer
from the relayer) go to the node as one JSON-RPC batch, so a verification costs one round trip.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ._eip712 import authorization_digest
from ._errors import PaymentInvalidError, RpcError
from ._rpc import RpcCall, RpcClient
from ._signature import recover_signer
from ._token import (
    ERC1271_MAGIC,
    Authorization,
    decode_bool,
    decode_string,
    decode_uint,
    encode_authorization_state,
    encode_balance_of,
    encode_is_valid_signature,
    encode_name,
    encode_transfer_with_authorization,
    encode_version,
)

__all__ = ["Terms", "VerifiedPayment", "Verifier"]

# Revert strings of USDC v2.2 (and the dev token) mapped to the x402 reason a payer can act on.
_REVERT_REASONS = (
    ("authorization is expired", "invalid_exact_evm_payload_authorization_valid_before"),
    ("authorization is not yet valid", "invalid_exact_evm_payload_authorization_valid_after"),
    ("authorization is used", "invalid_exact_evm_nonce_already_used"),
    ("transfer amount exceeds balance", "invalid_exact_evm_insufficient_balance"),
    ("invalid signature", "invalid_exact_evm_payload_signature"),
)


@dataclass(frozen=True, slots=True)
class Terms:
    """What the merchant asked for: one x402 `PaymentRequirements`, normalised."""

    network: str
    chain_id: int
    asset: str
    pay_to: str
    amount: int
    token_name: str
    token_version: str


@dataclass(frozen=True, slots=True)
class VerifiedPayment:
    """A payment that passed every check, with what settlement needs."""

    authorization: Authorization
    calldata: str
    gas_estimate: int


class Verifier:
    """Checks payments for one chain. Safe for concurrent use."""

    def __init__(self, rpc: RpcClient, *, chain_id: int, relayer: str, validity_margin_s: int = 6):
        self._rpc = rpc
        self._chain_id = chain_id
        self._relayer = relayer
        self._margin_s = validity_margin_s
        self._domains: dict[str, tuple[str, str]] = {}

    def check_offline(self, auth: Authorization, terms: Terms, *, now: int | None = None) -> bool:
        """Run every check that needs no chain access; return whether the signature is a plain EOA one.

        Raises PaymentInvalidError with the x402 reason of the first failed check. A signature that does
        not recover to `from` may still be a contract wallet's (ERC-1271), which only the chain can tell.
        """
        now = int(time.time()) if now is None else now
        if terms.chain_id != self._chain_id:
            raise PaymentInvalidError("invalid_network", f"this facilitator settles on chain {self._chain_id} only")
        if auth.to != terms.pay_to:
            raise PaymentInvalidError(
                "invalid_exact_evm_payload_recipient_mismatch", "authorization.to is not the payTo address"
            )
        if auth.value != terms.amount:
            raise PaymentInvalidError(
                "invalid_exact_evm_payload_authorization_value_mismatch",
                f"authorization.value {auth.value} is not the required amount {terms.amount}",
            )
        if auth.valid_after >= now:
            raise PaymentInvalidError(
                "invalid_exact_evm_payload_authorization_valid_after", "the authorization is not valid yet"
            )
        if auth.valid_before <= now + self._margin_s:
            raise PaymentInvalidError(
                "invalid_exact_evm_payload_authorization_valid_before",
                "the authorization expires before it could be settled",
            )
        self.cached_domain_check(terms)
        return recover_signer(self._digest(auth, terms), auth.signature) == auth.from_

    async def check_onchain(self, auth: Authorization, terms: Terms, *, eoa_signature: bool) -> VerifiedPayment:
        """Run the chain checks in one batch; raise PaymentInvalidError on the first that fails."""
        calldata = encode_transfer_with_authorization(auth)
        known_domain = self._domains.get(terms.asset)
        calls = [
            RpcCall("eth_call", [{"to": terms.asset, "data": encode_authorization_state(auth.from_, auth.nonce)}, "latest"]),
            RpcCall("eth_call", [{"to": terms.asset, "data": encode_balance_of(auth.from_)}, "latest"]),
            RpcCall("eth_estimateGas", [{"from": self._relayer, "to": terms.asset, "data": calldata}]),
        ]
        if known_domain is None:
            calls += [
                RpcCall("eth_getCode", [terms.asset, "latest"]),
                RpcCall("eth_call", [{"to": terms.asset, "data": encode_name()}, "latest"]),
                RpcCall("eth_call", [{"to": terms.asset, "data": encode_version()}, "latest"]),
            ]
        if not eoa_signature:
            digest = self._digest(auth, terms)
            calls += [
                RpcCall("eth_getCode", [auth.from_, "latest"]),
                RpcCall(
                    "eth_call",
                    [{"to": auth.from_, "data": encode_is_valid_signature(digest, auth.signature)}, "latest"],
                ),
            ]
        replies = await self._rpc.batch(calls)
        used, balance, gas = replies[:3]
        rest = replies[3:]
        if known_domain is None:
            code, name, version = rest[:3]
            rest = rest[3:]
            self._check_domain(terms, code, name, version)
        if not eoa_signature:
            wallet_code, magic = rest
            if not _is_contract(wallet_code) or isinstance(magic, RpcError) or magic[:10] != "0x" + ERC1271_MAGIC.hex():
                raise PaymentInvalidError(
                    "invalid_exact_evm_payload_signature", "the signature is not from authorization.from"
                )
        if isinstance(used, RpcError) or isinstance(balance, RpcError):
            raise PaymentInvalidError("invalid_exact_evm_eip3009_not_supported", "the asset does not support EIP-3009")
        if decode_bool(used):
            raise PaymentInvalidError(
                "invalid_exact_evm_nonce_already_used", "this authorization was already used or cancelled"
            )
        if decode_uint(balance) < auth.value:
            raise PaymentInvalidError("invalid_exact_evm_insufficient_balance", "the payer's balance is too low")
        if isinstance(gas, RpcError):
            raise _simulation_failure(gas)
        return VerifiedPayment(authorization=auth, calldata=calldata, gas_estimate=int(gas, 16))

    def _digest(self, auth: Authorization, terms: Terms) -> bytes:
        return authorization_digest(
            auth, name=terms.token_name, version=terms.token_version, chain_id=terms.chain_id, asset=terms.asset
        )

    def _check_domain(self, terms: Terms, code: object, name: object, version: object) -> None:
        if isinstance(code, RpcError) or not _is_contract(code):
            raise PaymentInvalidError("asset_not_deployed_contract", f"the asset {terms.asset} has no contract code")
        if isinstance(name, RpcError) or isinstance(version, RpcError):
            raise PaymentInvalidError("invalid_exact_evm_eip3009_not_supported", "the asset has no name()/version()")
        actual = (decode_string(str(name)), decode_string(str(version)))
        # Only a token that answered is cached: its EIP-712 domain cannot change under the same address.
        self._domains[terms.asset] = actual
        self._compare_domain(terms, actual)

    def _compare_domain(self, terms: Terms, actual: tuple[str, str]) -> None:
        if terms.token_name != actual[0]:
            raise PaymentInvalidError(
                "invalid_exact_evm_token_name_mismatch", f"extra.name is not the token's name {actual[0]!r}"
            )
        if terms.token_version != actual[1]:
            raise PaymentInvalidError(
                "invalid_exact_evm_token_version_mismatch", f"extra.version is not the token's version {actual[1]!r}"
            )

    def cached_domain_check(self, terms: Terms) -> None:
        """Compare `extra.name`/`extra.version` with the token's, when the token's domain is already known."""
        known = self._domains.get(terms.asset)
        if known is not None:
            self._compare_domain(terms, known)


def _is_contract(code: object) -> bool:
    return isinstance(code, str) and code not in ("0x", "0x0", "")


def _simulation_failure(error: RpcError) -> PaymentInvalidError:
    reason = error.revert_reason or error.message
    for needle, code in _REVERT_REASONS:
        if needle in reason:
            return PaymentInvalidError(code, f"the transfer would revert: {reason}")
    return PaymentInvalidError("invalid_exact_evm_transaction_simulation_failed", f"the transfer would revert: {reason}")
