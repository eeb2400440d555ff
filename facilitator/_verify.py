"""Verification of an exact-scheme EIP-3009 payment against the terms the merchant offered.

Cheap checks run first and need no chain access (fields, amounts, times, signature recovery); the chain
reads that remain (token domain, asset code, authorization state, balance, the head block, a simulation of
the transfer from the relayer) go to the node as one JSON-RPC batch, so a verification costs one round trip.

Time: the wall clock decides `validAfter` and `validBefore`, never the head block, which lags it on any
chain and by minutes on a dev chain that mines only when a transaction arrives. The transfer is simulated
in the `pending` block, which nodes stamp with the time of the block being built (anvil and geth: the
wall clock, and at least the head's timestamp + 1), so the token's own time checks see the block the
settlement would land in, not a stale head. A head *ahead* of the wall clock (a node whose clock runs
fast, a rollup stamping early) is a real constraint, since the next block cannot be older than it: the
authorization must then stay valid past the head's timestamp + 1 plus the margin, or it is refused as
expiring too soon (settling it would only revert). `validAfter` is never moved by a future head: the payer
named a moment of the wall clock, and that has not come.

The gas a settlement needs is estimated for every payment whose `from` has code: a contract wallet's
ERC-1271 check can cost anything, so one wallet's estimate says nothing about another's. Only plain EOA
payments, whose cost barely varies, reuse the first estimate per token. Every estimate must fit under the
gas limit cap, or the payment is refused before anything is claimed or sent.

FiatToken's refusals are read before the simulation so the payer learns which one applies: a paused token,
a blacklisted payer, a blacklisted payee (tokens without `paused()`/`isBlacklisted()` skip these reads).

An ERC-6492 signature (`_erc6492`) of a wallet that already has code is unwrapped and checked as ERC-1271,
its factory never called. For a wallet without code, the factory must be one the operator listed
(`X402_ERC6492_FACTORIES`, none by default): the wrapper's factory and calldata come from the payer, and
settling would have the relayer pay for that call, so an unlisted one is refused before any simulation.
For a listed one, the factory call, the wallet's ERC-1271 answer and the transfer are simulated in order
within one Multicall3 `eth_call`, and the transaction settlement sends, the factory call then the transfer
through `aggregate3`, is estimated against the same cap.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eth_abi.exceptions import DecodingError

from ._erc6492 import (
    MULTICALL3_ADDRESS,
    Call3,
    Erc6492Signature,
    encode_aggregate3,
    unwrap_erc6492,
)
from ._errors import PaymentInvalidError, RpcError
from ._gas import SIMULATION_BLOCK, TransferGas, is_contract
from ._lagging_clock import simulate_at_wall_clock
from ._refusals import check_counterfactual_steps, check_token_state, is_erc1271_magic, simulation_failure
from ._rpc import RpcCall, RpcClient
from ._signed import SignatureMemo
from ._token import (
    Authorization,
    decode_string,
    encode_authorization_state,
    encode_balance_of,
    encode_is_blacklisted,
    encode_is_valid_signature,
    encode_name,
    encode_paused,
    encode_transfer_with_authorization,
    encode_version,
)
from .wire import Reason, checksum_address

__all__ = ["Terms", "VerifiedPayment", "Verifier"]

_HEAD_BLOCK = RpcCall("eth_getBlockByNumber", ["latest", False])

# How many token reads `Verifier._state_calls` puts first in a full batch.
_STATE_READS = 5


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


_SIMULATION_FAILED = Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED
_BAD_SIGNATURE = Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE


@dataclass(frozen=True, slots=True)
class VerifiedPayment:
    """A payment that passed every check, with what settlement needs: the transaction's `to` and data.

    `target` is the token, or Multicall3 when an ERC-6492 wallet is deployed in the same transaction.
    """

    authorization: Authorization
    calldata: str
    gas_estimate: int
    target: str


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
        erc6492_factories: Iterable[str] = (),
    ):
        self._rpc = rpc
        self._factories = frozenset(checksum_address(factory) for factory in erc6492_factories)
        self._chain_id = chain_id
        self._relayer = relayer
        self._margin_s = validity_margin_s
        self._gas = TransferGas(rpc, relayer=relayer, cap=gas_limit_cap)
        self._domains: dict[str, tuple[str, str]] = {}
        self._signed = SignatureMemo()

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
        digest = self._digest(auth, terms)
        wrapped = unwrap_erc6492(auth.signature)
        if wrapped is None:
            return self._signed.signer(digest, auth.signature) == auth.from_
        if self._signed.signer(digest, wrapped.signature) == auth.from_:
            raise PaymentInvalidError(
                _BAD_SIGNATURE,
                "authorization.from signed as an EOA: an EOA's signature carries no ERC-6492 deployment data",
            )
        return False

    async def check_onchain(
        self, auth: Authorization, terms: Terms, *, eoa_signature: bool, now: int | None = None
    ) -> VerifiedPayment:
        """Run the chain checks in one batch; raise PaymentInvalidError on the first that fails.

        An ERC-6492 signature costs one more round trip first, to learn whether the wallet exists; one
        without code whose factory is not listed is refused then, before anything is simulated. `now` (unix
        seconds, default the wall clock) is the moment `check_offline` judged the validity window at; a
        head block ahead of it moves the earliest possible settlement later.
        """
        now = int(time.time()) if now is None else now
        wrapped = unwrap_erc6492(auth.signature)
        if wrapped is None:
            return await self._check_transfer(auth, terms, eoa_signature=eoa_signature, now=now)
        unwrapped = dataclasses.replace(auth, signature=wrapped.signature)
        if is_contract(await self._rpc.call("eth_getCode", auth.from_, "latest")):
            verified = await self._check_transfer(unwrapped, terms, eoa_signature=False, now=now)
        elif wrapped.factory not in self._factories:
            raise PaymentInvalidError(
                Reason.EIP6492_FACTORY_NOT_ALLOWED,
                f"the wallet has no code and its factory {wrapped.factory} is not one this facilitator "
                "deploys wallets through",
            )
        else:
            verified = await self._check_counterfactual(unwrapped, wrapped, terms, now)
        return dataclasses.replace(verified, authorization=auth)

    async def _check_transfer(
        self, auth: Authorization, terms: Terms, *, eoa_signature: bool, now: int
    ) -> VerifiedPayment:
        """The checks of a payment sent straight to the token: from an EOA or a wallet with code.

        For a token whose domain is known, the simulation, the signer's code and the head are read first,
        alone: a transfer the token would make needs none of the token reads (it reverts on a used nonce,
        a pause, a blacklisted party or too low a balance). Only a payment that fails there, or on a
        token not seen before, is read in full, so that its refusal names the reason as it always has.
        """
        calldata = encode_transfer_with_authorization(auth)
        if terms.asset in self._domains:
            replies = await self._rpc.batch(self._transfer_calls(auth, terms, calldata, eoa_signature))
            try:
                return await self._judge_transfer(auth, terms, calldata, replies, eoa_signature, now)
            except PaymentInvalidError:
                pass  # read in full below, for the reason
        calls = [*self._state_calls(auth, terms), *self._transfer_calls(auth, terms, calldata, eoa_signature)]
        rest = self._check_domain_replies(terms, await self._rpc.batch(calls))
        return await self._judge_transfer(
            auth, terms, calldata, rest[_STATE_READS:], eoa_signature, now, state=rest[:_STATE_READS]
        )

    def _transfer_calls(
        self, auth: Authorization, terms: Terms, calldata: str, eoa_signature: bool
    ) -> list[RpcCall]:
        """The simulation, the signer's code, the head, and a contract signer's ERC-1271 answer."""
        calls = [
            self._gas.simulation(terms.asset, calldata, eoa_signature),
            RpcCall("eth_getCode", [auth.from_, "latest"]),
            _HEAD_BLOCK,
        ]
        if not eoa_signature:
            digest = self._digest(auth, terms)
            calls.append(
                RpcCall(
                    "eth_call",
                    [{"to": auth.from_, "data": encode_is_valid_signature(digest, auth.signature)}, "latest"],
                )
            )
        return calls

    async def _judge_transfer(
        self,
        auth: Authorization,
        terms: Terms,
        calldata: str,
        replies: list[Any],
        eoa_signature: bool,
        now: int,
        *,
        state: list[Any] | None = None,
    ) -> VerifiedPayment:
        """Refuse on the replies of `_transfer_calls` (and the token reads, if made), in the order payers
        have always been told: the signature, the token's state, the head's time, the simulation."""
        gas, wallet_code, head, *magic = replies
        if not eoa_signature and (
            not is_contract(wallet_code) or isinstance(magic[0], RpcError) or not is_erc1271_magic(magic[0])
        ):
            raise PaymentInvalidError(_BAD_SIGNATURE, "the signature is not from authorization.from")
        if state is not None:
            check_token_state(auth, state)
        self._check_head_time(auth, head, now)
        if isinstance(gas, RpcError):
            simulation = self._gas.simulation(terms.asset, calldata, eoa_signature)
            gas = await simulate_at_wall_clock(
                self._rpc, simulation, gas, valid_after=auth.valid_after, now=now
            )
        estimate = await self._gas.estimate(terms.asset, calldata, eoa_signature, wallet_code, gas)
        self._gas.check_cap(estimate)
        return VerifiedPayment(
            authorization=auth, calldata=calldata, gas_estimate=estimate, target=terms.asset
        )

    async def _check_counterfactual(
        self, auth: Authorization, wrapped: Erc6492Signature, terms: Terms, now: int
    ) -> VerifiedPayment:
        """The checks of an ERC-6492 wallet without code: deployment and transfer simulated together.

        The diagnosis call lets each step fail on its own, so the refusal names the step: the factory
        call, the wallet's ERC-1271 answer (no answer at all: the factory deployed nothing there), or the
        transfer. The estimate is of the transaction settlement would send, where any failure reverts all.
        """
        factory = Call3(wrapped.factory, False, wrapped.factory_calldata)
        transfer = Call3(terms.asset, False, bytes.fromhex(encode_transfer_with_authorization(auth)[2:]))
        check = Call3(
            auth.from_,
            True,
            bytes.fromhex(encode_is_valid_signature(self._digest(auth, terms), auth.signature)[2:]),
        )
        diagnosis = encode_aggregate3(
            [
                dataclasses.replace(factory, allow_failure=True),
                check,
                dataclasses.replace(transfer, allow_failure=True),
            ]
        )
        calldata = encode_aggregate3([factory, transfer])
        calls = [
            *self._state_calls(auth, terms),
            RpcCall("eth_getCode", [MULTICALL3_ADDRESS, "latest"]),
            RpcCall(
                "eth_call",
                [{"from": self._relayer, "to": MULTICALL3_ADDRESS, "data": diagnosis}, SIMULATION_BLOCK],
            ),
            RpcCall(
                "eth_estimateGas",
                [{"from": self._relayer, "to": MULTICALL3_ADDRESS, "data": calldata}, SIMULATION_BLOCK],
            ),
            _HEAD_BLOCK,
        ]
        rest = self._check_domain_replies(terms, await self._rpc.batch(calls))
        state, (multicall_code, steps, gas, head) = rest[:_STATE_READS], rest[_STATE_READS:]
        if not is_contract(multicall_code) or isinstance(steps, RpcError):
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET,
                f"this chain has no Multicall3 at {MULTICALL3_ADDRESS} to deploy the wallet with",
            )
        if state is not None:
            check_token_state(auth, state)
        self._check_head_time(auth, head, now)
        check_counterfactual_steps(steps)
        if isinstance(gas, RpcError):
            raise simulation_failure(gas.revert_reason or gas.message)
        estimate = int(gas, 16)
        self._gas.check_cap(estimate, what="deploying the wallet and the transfer need")
        return VerifiedPayment(
            authorization=auth, calldata=calldata, gas_estimate=estimate, target=MULTICALL3_ADDRESS
        )

    def _state_calls(self, auth: Authorization, terms: Terms) -> list[RpcCall]:
        """The token reads every payment needs (`_STATE_READS` of them), then the domain's if not known."""

        def read(data: str) -> RpcCall:
            return RpcCall("eth_call", [{"to": terms.asset, "data": data}, "latest"])

        calls = [
            read(encode_authorization_state(auth.from_, auth.nonce)),
            read(encode_balance_of(auth.from_)),
            read(encode_paused()),
            read(encode_is_blacklisted(auth.from_)),
            read(encode_is_blacklisted(auth.to)),
        ]
        if terms.asset not in self._domains:
            calls += [
                RpcCall("eth_getCode", [terms.asset, "latest"]),
                read(encode_name()),
                read(encode_version()),
            ]
        return calls

    def _check_domain_replies(self, terms: Terms, replies: list[Any]) -> list[Any]:
        """Check the domain reads among `replies`, if they were made; return the other replies in order."""
        if terms.asset in self._domains:
            return replies
        code, name, version = replies[_STATE_READS : _STATE_READS + 3]
        self._check_domain(terms, code, name, version)
        return replies[:_STATE_READS] + replies[_STATE_READS + 3 :]

    def _check_head_time(self, auth: Authorization, head: object, now: int) -> None:
        """Refuse an authorization that expires before the next block could include it, when the head
        block is ahead of the wall clock (behind it, `check_offline` has already decided).

        A head the node could not give (anvil answers null for `latest` while it is mining one) skips
        this check: the simulation in the pending block still sees a head far ahead.
        """
        timestamp = head.get("timestamp") if isinstance(head, dict) else None
        if not isinstance(timestamp, str):
            return
        try:
            head_time = int(timestamp, 16)
        except ValueError:
            return
        # The next block is stamped after the head: with a head ahead of the clock, that binds.
        if head_time > now and auth.valid_before <= head_time + 1 + self._margin_s:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE,
                f"the chain's head block is {head_time - now} s ahead of this facilitator's clock: the "
                "authorization expires before a new block could include it",
            )

    def _digest(self, auth: Authorization, terms: Terms) -> bytes:
        return self._signed.digest(
            auth,
            name=terms.token_name,
            version=terms.token_version,
            chain_id=terms.chain_id,
            asset=terms.asset,
        )

    def _check_domain(self, terms: Terms, code: object, name: object, version: object) -> None:
        if isinstance(code, RpcError) or not is_contract(code):
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
