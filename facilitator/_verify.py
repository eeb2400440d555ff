"""Verification of an exact-scheme EIP-3009 payment against the terms the merchant offered.

Cheap checks run first and need no chain access (fields, amounts, times, signature recovery); the chain
reads that remain (token domain, asset code, authorization state, balance, a simulation of the transfer
from the relayer) go to the node as one JSON-RPC batch, so a verification costs one round trip.

The gas a settlement needs is estimated for every payment whose `from` has code: a contract wallet's
ERC-1271 check can cost anything, so one wallet's estimate says nothing about another's. Only plain EOA
payments, whose cost barely varies, reuse the first estimate per token. Every estimate must fit under the
gas limit cap, or the payment is refused before anything is claimed or sent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from eth_abi.exceptions import DecodingError

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
from .wire import Reason

__all__ = ["Terms", "VerifiedPayment", "Verifier"]

# Revert strings of USDC v2.2 (and the dev token) mapped to the x402 reason a payer can act on.
_REVERT_REASONS = (
    ("authorization is expired", Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE),
    ("authorization is not yet valid", Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER),
    ("authorization is used", Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED),
    ("transfer amount exceeds balance", Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE),
    ("invalid signature", Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE),
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

    def __init__(
        self,
        rpc: RpcClient,
        *,
        chain_id: int,
        relayer: str,
        validity_margin_s: int = 6,
        gas_limit_cap: int = 300_000,
    ):
        self._rpc = rpc
        self._chain_id = chain_id
        self._relayer = relayer
        self._margin_s = validity_margin_s
        self._gas_limit_cap = gas_limit_cap
        self._domains: dict[str, tuple[str, str]] = {}
        # Gas of a transfer signed by an EOA without code, per token.
        self._eoa_gas: dict[str, int] = {}

    def check_offline(self, auth: Authorization, terms: Terms, *, now: int | None = None) -> bool:
        """Run every check that needs no chain access; return whether the signature is a plain EOA one.

        Raises PaymentInvalidError with the x402 reason of the first failed check. A signature that does
        not recover to `from` may still be a contract wallet's (ERC-1271), which only the chain can tell.
        """
        now = int(time.time()) if now is None else now
        if terms.chain_id != self._chain_id:
            raise PaymentInvalidError(
                Reason.INVALID_NETWORK, f"this facilitator settles on chain {self._chain_id} only"
            )
        if auth.to != terms.pay_to:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_PAYLOAD_RECIPIENT_MISMATCH,
                "authorization.to is not the payTo address",
            )
        if auth.value != terms.amount:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH,
                f"authorization.value {auth.value} is not the required amount {terms.amount}",
            )
        if auth.valid_after >= now:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER,
                "the authorization is not valid yet",
            )
        if auth.valid_before <= now + self._margin_s:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE,
                "the authorization expires before it could be settled",
            )
        self.cached_domain_check(terms)
        return recover_signer(self._digest(auth, terms), auth.signature) == auth.from_

    async def check_onchain(
        self, auth: Authorization, terms: Terms, *, eoa_signature: bool
    ) -> VerifiedPayment:
        """Run the chain checks in one batch; raise PaymentInvalidError on the first that fails."""
        calldata = encode_transfer_with_authorization(auth)
        known_domain = self._domains.get(terms.asset)
        calls = [
            RpcCall(
                "eth_call",
                [{"to": terms.asset, "data": encode_authorization_state(auth.from_, auth.nonce)}, "latest"],
            ),
            RpcCall("eth_call", [{"to": terms.asset, "data": encode_balance_of(auth.from_)}, "latest"]),
            self._simulation(terms.asset, calldata, eoa_signature),
            RpcCall("eth_getCode", [auth.from_, "latest"]),
        ]
        if known_domain is None:
            calls += [
                RpcCall("eth_getCode", [terms.asset, "latest"]),
                RpcCall("eth_call", [{"to": terms.asset, "data": encode_name()}, "latest"]),
                RpcCall("eth_call", [{"to": terms.asset, "data": encode_version()}, "latest"]),
            ]
        if not eoa_signature:
            digest = self._digest(auth, terms)
            calls.append(
                RpcCall(
                    "eth_call",
                    [{"to": auth.from_, "data": encode_is_valid_signature(digest, auth.signature)}, "latest"],
                )
            )
        replies = await self._rpc.batch(calls)
        used, balance, gas, wallet_code = replies[:4]
        rest = replies[4:]
        if known_domain is None:
            code, name, version = rest[:3]
            rest = rest[3:]
            self._check_domain(terms, code, name, version)
        if not eoa_signature:
            (magic,) = rest
            if (
                not _is_contract(wallet_code)
                or isinstance(magic, RpcError)
                or magic[:10] != "0x" + ERC1271_MAGIC.hex()
            ):
                raise PaymentInvalidError(
                    Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE, "the signature is not from authorization.from"
                )
        if isinstance(used, RpcError) or isinstance(balance, RpcError):
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_EIP3009_NOT_SUPPORTED, "the asset does not support EIP-3009"
            )
        if decode_bool(used):
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED,
                "this authorization was already used or cancelled",
            )
        if decode_uint(balance) < auth.value:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE, "the payer's balance is too low"
            )
        if isinstance(gas, RpcError):
            raise _simulation_failure(gas)
        estimate = await self._gas_estimate(terms.asset, calldata, eoa_signature, wallet_code, gas)
        if estimate > self._gas_limit_cap:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED,
                f"the transfer needs {estimate} gas, more than this facilitator's cap "
                f"of {self._gas_limit_cap}",
            )
        return VerifiedPayment(authorization=auth, calldata=calldata, gas_estimate=estimate)

    def _simulation(self, asset: str, calldata: str, eoa_signature: bool) -> RpcCall:
        """The transfer simulated from the relayer: a gas estimate, or a plain (cheaper) call.

        `eth_estimateGas` runs the call several times over. The cost of an EOA's transfer hardly varies
        for one token, so once known it is simulated with `eth_call` alone; a contract wallet's signature
        check can cost anything, so its transfer is always estimated.
        """
        call = {"from": self._relayer, "to": asset, "data": calldata}
        if eoa_signature and asset in self._eoa_gas:
            return RpcCall("eth_call", [call, "latest"])
        return RpcCall("eth_estimateGas", [call])

    async def _gas_estimate(
        self, asset: str, calldata: str, eoa_signature: bool, signer_code: object, simulated: str
    ) -> int:
        """The gas of this transfer: estimated in the batch, remembered for EOAs, or estimated now.

        An EOA signature from an address with code (an EIP-7702 account) is checked by the token through
        ERC-1271 and may cost anything: its simulation, a plain call, is followed by an estimate.
        """
        has_code = not isinstance(signer_code, RpcError) and _is_contract(signer_code)
        if not eoa_signature:
            return int(simulated, 16)
        known = self._eoa_gas.get(asset)
        if known is None:
            estimate = int(simulated, 16)
            if not has_code:
                self._eoa_gas[asset] = estimate
            return estimate
        if not has_code:
            return known
        try:
            reply = await self._rpc.call(
                "eth_estimateGas", {"from": self._relayer, "to": asset, "data": calldata}
            )
        except RpcError as exc:
            raise _simulation_failure(exc) from exc
        return int(reply, 16)

    def _digest(self, auth: Authorization, terms: Terms) -> bytes:
        return authorization_digest(
            auth,
            name=terms.token_name,
            version=terms.token_version,
            chain_id=terms.chain_id,
            asset=terms.asset,
        )

    def _check_domain(self, terms: Terms, code: object, name: object, version: object) -> None:
        if isinstance(code, RpcError) or not _is_contract(code):
            raise PaymentInvalidError(
                Reason.ASSET_NOT_DEPLOYED_CONTRACT, f"the asset {terms.asset} has no contract code"
            )
        token_name, token_version = _string_result(name), _string_result(version)
        if token_name is None or token_version is None:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_EIP3009_NOT_SUPPORTED, "the asset has no usable name()/version()"
            )
        actual = (token_name, token_version)
        # Only a token that answered is cached: its EIP-712 domain cannot change under the same address.
        self._domains[terms.asset] = actual
        self._compare_domain(terms, actual)

    def _compare_domain(self, terms: Terms, actual: tuple[str, str]) -> None:
        if terms.token_name != actual[0]:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_TOKEN_NAME_MISMATCH,
                f"extra.name is not the token's name {actual[0]!r}",
            )
        if terms.token_version != actual[1]:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_TOKEN_VERSION_MISMATCH,
                f"extra.version is not the token's version {actual[1]!r}",
            )

    def cached_domain_check(self, terms: Terms) -> None:
        """Compare `extra.name`/`extra.version` with the token's, when the token's domain is already known."""
        known = self._domains.get(terms.asset)
        if known is not None:
            self._compare_domain(terms, known)


def _string_result(reply: object) -> str | None:
    """The string an eth_call returned, or None for a revert or a result that is not an ABI string."""
    if not isinstance(reply, str):
        return None
    try:
        return decode_string(reply)
    except (DecodingError, ValueError):
        return None


def _is_contract(code: object) -> bool:
    return isinstance(code, str) and code not in ("0x", "0x0", "")


def _simulation_failure(error: RpcError) -> PaymentInvalidError:
    reason = error.revert_reason or error.message
    for needle, code in _REVERT_REASONS:
        if needle in reason:
            return PaymentInvalidError(code, f"the transfer would revert: {reason}")
    return PaymentInvalidError(
        Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED, f"the transfer would revert: {reason}"
    )
