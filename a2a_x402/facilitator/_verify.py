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
named a moment of the wall clock, and that has not come. A node simulating behind the wall clock (ganache
simulates `pending` in its last block) is `_lagging_clock`'s.

Every simulation runs from the relayer with the fee caps its send will carry (`_gas.Fees`, the relayer's
own, read at most once a second): a node runs a call without fees at a gas price of zero, and a wallet
could answer "valid" only then. The signer's code hash is handed on, so a payer whose settlement reverted
anyway can be told apart (`_reverts`).

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
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ._domains import TokenDomains
from ._erc6492 import (
    MULTICALL3_ADDRESS,
    Call3,
    Erc6492Signature,
    encode_aggregate3,
    unwrap_erc6492,
)
from ._errors import PaymentInvalidError, RpcError
from ._gas import (
    NO_FEES,
    SIMULATION_BLOCK,
    Fees,
    RelayerCannotPayError,
    TransferGas,
    is_contract,
    unaffordable,
)
from ._lagging_clock import NodeClock, estimate_counterfactual_at_wall_clock
from ._refusals import (
    check_counterfactual_steps,
    check_head_time,
    check_token_state,
    is_erc1271_magic,
    simulation_failure,
)
from ._reverts import wallet_code_hash
from ._rpc import RpcCall, RpcClient
from ._signed import SignatureMemo
from ._terms import Terms, check_terms
from ._token import (
    Authorization,
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

__all__ = ["VerifiedPayment", "Verifier"]

logger = logging.getLogger(__name__)

_HEAD_BLOCK = RpcCall("eth_getBlockByNumber", ["latest", False])

# How many token reads `Verifier._state_calls` puts first in a full batch.
_STATE_READS = 5


_SIMULATION_FAILED = Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED
_BAD_SIGNATURE = Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE


@dataclass(frozen=True, slots=True)
class VerifiedPayment:
    """A payment that passed every check, with what settlement needs: the transaction's `to` and data.

    `target` is the token, or Multicall3 when an ERC-6492 wallet is deployed in the same transaction.
    `code_hash` is the keccak-256 of the payer's code, for a wallet that has code (not a 7702 delegation).
    """

    authorization: Authorization
    calldata: str
    gas_estimate: int
    target: str
    code_hash: str | None = None


class Verifier:
    """Checks payments for one chain. Safe for concurrent use."""

    def __init__(
        self,
        rpc: RpcClient,
        *,
        chain_id: int,
        relayer: str,
        fees: Callable[[], Awaitable[tuple[int, int]]],
        validity_margin_s: int = 6,
        gas_limit_cap: int = 300_000,
        erc6492_factories: Iterable[str] = (),
    ):
        self._rpc = rpc
        self._factories = frozenset(checksum_address(factory) for factory in erc6492_factories)
        self._chain_id = chain_id
        self._relayer = relayer
        self._fees = fees
        self._margin_s = validity_margin_s
        self._gas = TransferGas(rpc, relayer=relayer, cap=gas_limit_cap)
        self._clock = NodeClock(rpc, margin_s=validity_margin_s)
        self._domains = TokenDomains()
        self._signed = SignatureMemo()

    def check_offline(self, auth: Authorization, terms: Terms, *, now: int | None = None) -> bool:
        """Run every check that needs no chain access; return whether the signature is a plain EOA one.

        Raises PaymentInvalidError with the x402 reason of the first failed check. A signature that does
        not recover to `from` may still be a contract wallet's (ERC-1271), which only the chain can tell.
        """
        now = int(time.time()) if now is None else now
        check_terms(auth, terms, chain_id=self._chain_id, now=now, margin_s=self._margin_s)
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
        fees = Fees(*await self._fees())
        try:
            return await self._check_onchain(auth, terms, fees, eoa_signature, now)
        except RelayerCannotPayError as exc:
            logger.warning(
                "the relayer's balance does not cover a simulation at its fees (%s): without them", exc
            )
            return await self._check_onchain(auth, terms, NO_FEES, eoa_signature, now)

    async def _check_onchain(
        self, auth: Authorization, terms: Terms, fees: Fees, eoa_signature: bool, now: int
    ) -> VerifiedPayment:
        """`check_onchain` with `fees`.

        Raises:
            RelayerCannotPayError: the node would not simulate at `fees` for the relayer's balance.
        """
        wrapped = unwrap_erc6492(auth.signature)
        if wrapped is None:
            return await self._check_transfer(auth, terms, fees, eoa_signature=eoa_signature, now=now)
        unwrapped = dataclasses.replace(auth, signature=wrapped.signature)
        if is_contract(await self._rpc.call("eth_getCode", auth.from_, "latest")):
            verified = await self._check_transfer(unwrapped, terms, fees, eoa_signature=False, now=now)
        elif wrapped.factory not in self._factories:
            raise PaymentInvalidError(
                Reason.EIP6492_FACTORY_NOT_ALLOWED,
                f"the wallet has no code and its factory {wrapped.factory} is not one this facilitator "
                "deploys wallets through",
            )
        else:
            verified = await self._check_counterfactual(unwrapped, wrapped, terms, fees, now)
        return dataclasses.replace(verified, authorization=auth)

    async def _check_transfer(
        self, auth: Authorization, terms: Terms, fees: Fees, *, eoa_signature: bool, now: int
    ) -> VerifiedPayment:
        """The checks of a payment sent straight to the token: from an EOA or a wallet with code.

        For a token whose domain is known, the simulation, the signer's code and the head are read first,
        alone: a transfer the token would make needs none of the token reads (it reverts on a used nonce,
        a pause, a blacklisted party or too low a balance). Only a payment that fails there, or on a
        token not seen before, is read in full, so that its refusal names the reason as it always has.
        """
        # One at a time while the token's transfer gas is unknown: see `TransferGas.learning`.
        async with self._gas.learning(terms.asset, eoa_signature):
            calldata = encode_transfer_with_authorization(auth)
            if terms.asset in self._domains:
                replies = await self._rpc.batch(
                    self._transfer_calls(auth, terms, calldata, eoa_signature, fees)
                )
                try:
                    return await self._judge_transfer(
                        auth, terms, calldata, replies, eoa_signature, fees, now
                    )
                except PaymentInvalidError:
                    pass  # read in full below, for the reason
            calls = [
                *self._state_calls(auth, terms),
                *self._transfer_calls(auth, terms, calldata, eoa_signature, fees),
            ]
            rest = self._check_domain_replies(terms, await self._rpc.batch(calls))
            return await self._judge_transfer(
                auth,
                terms,
                calldata,
                rest[_STATE_READS:],
                eoa_signature,
                fees,
                now,
                state=rest[:_STATE_READS],
            )

    def _transfer_calls(
        self, auth: Authorization, terms: Terms, calldata: str, eoa_signature: bool, fees: Fees
    ) -> list[RpcCall]:
        """The simulation, the signer's code, the head, and a contract signer's ERC-1271 answer (asked as
        the settlement would ask it: from the relayer, at its fees)."""
        calls = [
            self._gas.simulation(terms.asset, calldata, eoa_signature, fees),
            RpcCall("eth_getCode", [auth.from_, "latest"]),
            _HEAD_BLOCK,
        ]
        if not eoa_signature:
            digest = self._digest(auth, terms)
            calls.append(
                RpcCall(
                    "eth_call",
                    [
                        self._gas.call(
                            auth.from_,
                            encode_is_valid_signature(digest, auth.signature),
                            fees,
                            gas=self._gas.cap,
                        ),
                        "latest",
                    ],
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
        fees: Fees,
        now: int,
        *,
        state: list[Any] | None = None,
    ) -> VerifiedPayment:
        """Refuse on the replies of `_transfer_calls` (and the token reads, if made), in the order payers
        have always been told: the signature, the token's state, the head's time, the simulation."""
        gas, wallet_code, head, *magic = replies
        if fees != NO_FEES and (unaffordable(gas) or (magic and unaffordable(magic[0]))):
            raise RelayerCannotPayError(str(gas if unaffordable(gas) else magic[0]))
        if not eoa_signature and (
            not is_contract(wallet_code) or isinstance(magic[0], RpcError) or not is_erc1271_magic(magic[0])
        ):
            raise PaymentInvalidError(_BAD_SIGNATURE, "the signature is not from authorization.from")
        if state is not None:
            check_token_state(auth, state)
        check_head_time(auth.valid_before, head, now, self._margin_s)
        if isinstance(gas, RpcError):
            simulation = self._gas.simulation(terms.asset, calldata, eoa_signature, fees)
            # Reads vouch for all but the time (nonce, pause, blacklists, balance, a recovered signature)
            # only for an EOA without code, once the token reads were made.
            readable = state is not None and eoa_signature and not is_contract(wallet_code)
            gas = await self._clock.simulate_at_wall_clock(
                simulation, gas, valid_after=auth.valid_after, now=now, readable=readable
            )
        if gas is None:
            estimate = self._gas.unsimulated(terms.asset)
        else:
            estimate = await self._gas.estimate(terms.asset, calldata, eoa_signature, wallet_code, gas, fees)
        self._gas.check_cap(estimate)
        return VerifiedPayment(
            authorization=auth,
            calldata=calldata,
            gas_estimate=estimate,
            target=terms.asset,
            code_hash=wallet_code_hash(wallet_code),
        )

    async def _check_counterfactual(
        self, auth: Authorization, wrapped: Erc6492Signature, terms: Terms, fees: Fees, now: int
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
        # Twice the cap: the diagnosis asks the wallet's ERC-1271 answer once more than the transaction.
        steps_call = RpcCall(
            "eth_call",
            [self._gas.call(MULTICALL3_ADDRESS, diagnosis, fees, gas=2 * self._gas.cap), SIMULATION_BLOCK],
        )
        estimate_call = RpcCall(
            "eth_estimateGas", [self._gas.call(MULTICALL3_ADDRESS, calldata, fees), SIMULATION_BLOCK]
        )
        calls = [
            *self._state_calls(auth, terms),
            RpcCall("eth_getCode", [MULTICALL3_ADDRESS, "latest"]),
            steps_call,
            estimate_call,
            _HEAD_BLOCK,
        ]
        rest = self._check_domain_replies(terms, await self._rpc.batch(calls))
        state, (multicall_code, steps, gas, head) = rest[:_STATE_READS], rest[_STATE_READS:]
        if fees != NO_FEES and (unaffordable(steps) or unaffordable(gas)):
            raise RelayerCannotPayError(str(steps if unaffordable(steps) else gas))
        if not is_contract(multicall_code) or isinstance(steps, RpcError):
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET,
                f"this chain has no Multicall3 at {MULTICALL3_ADDRESS} to deploy the wallet with",
            )
        if state is not None:
            check_token_state(auth, state)
        check_head_time(auth.valid_before, head, now, self._margin_s)
        try:
            check_counterfactual_steps(steps)
            if isinstance(gas, RpcError):
                raise simulation_failure(gas.revert_reason or gas.message)
        except PaymentInvalidError as refusal:
            # A node simulating behind the wall clock, as for a payment sent straight to the token.
            gas = await estimate_counterfactual_at_wall_clock(
                self._rpc, steps_call, estimate_call, refusal, valid_after=auth.valid_after, now=now
            )
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
        self._domains.learn(terms.asset, terms.token_name, terms.token_version, (code, name, version))
        return replies[:_STATE_READS] + replies[_STATE_READS + 3 :]

    def _digest(self, auth: Authorization, terms: Terms) -> bytes:
        return self._signed.digest(
            auth,
            name=terms.token_name,
            version=terms.token_version,
            chain_id=terms.chain_id,
            asset=terms.asset,
        )

    def cached_domain_check(self, terms: Terms) -> None:
        """Compare `extra.name`/`extra.version` with the token's, when the token's domain is already known."""
        self._domains.compare(terms.asset, terms.token_name, terms.token_version)
