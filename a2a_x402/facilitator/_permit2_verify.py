"""Verification of a Permit2 payment (`exact` by Permit2, or `upto`) against the terms the merchant offered.

The checks without the chain are `_permit2_rules.check_permit2`'s; the chain is then asked everything in
one JSON-RPC batch, as for EIP-3009 (`_verify`): whether Permit2, the scheme's x402 proxy and the token have
code, the payer's code, balance and allowance to Permit2, Permit2's `nonceBitmap` word holding the nonce,
the head block, a contract payer's ERC-1271 answer, and a simulation of the proxy's `settle` in the `pending`
block, sent from the address that will send it (any relayer for `exact`; for `upto` the witness's
`facilitator`, the only sender the proxy accepts) with the fee caps the real transaction carries.

Refusals come in the order the x402 Python SDK checks: contracts, signature, nonce, allowance, balance; then
the head's time and the simulation. The balance and allowance needed are what the settlement moves (the
permitted amount; for `upto`, the maximum at verification and the charge at settlement), and the
simulation settles that much.

A payer whose allowance is short may carry the SDKs' `eip2612GasSponsoring` extension, an EIP-2612 permit
of Permit2 for the token (`_eip2612`): held against the payment, and the proxy's `settleWithPermit`, which
relays the permit first, is simulated instead (both simulations ride in the same batch), and is what the
settlement sends. With the allowance already there the extension is not used: the plain `settle` is cheaper.

Wallets as for EIP-3009: a contract payer answers ERC-1271 (asked from the sender, at its fees); an ERC-6492
wrapper of a wallet with code is unwrapped; a wallet without code is `_permit2_wallet`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ._eip2612 import Eip2612Permit, check_eip2612, read_eip2612
from ._errors import PaymentInvalidError, RpcError
from ._gas import NO_FEES, Fees, RelayerCannotPayError, TransferGas, is_contract, unaffordable
from ._lagging_clock import NodeClock
from ._permit2 import PERMIT2_ADDRESS
from ._permit2_calls import encode_nonce_bitmap, encode_settle
from ._permit2_refusals import (
    SIMULATION_FAILED,
    allowance_required,
    check_balance,
    check_contracts,
    check_nonce_unused,
    erc20_amount,
    settle_refusal,
)
from ._permit2_rules import Permit2Signature, check_permit2
from ._permit2_verified import HEAD_BLOCK, PROXIES, READS, VerifiedPermit2, permit2_reads, permit2_schemes
from ._permit2_wallet import check_counterfactual
from ._refusals import check_head_time, is_erc1271_magic
from ._request import Permit2Request
from ._reverts import wallet_code_hash
from ._rpc import RpcCall, RpcClient
from ._token import encode_is_valid_signature
from .wire import Reason, UptoPermit2Authorization, checksum_address

__all__ = ["Permit2Verifier"]

logger = logging.getLogger(__name__)

_PLAIN, _WITH_PERMIT = 0, 1
"""Which of a plan's simulations the settlement sends: the plain `settle`, or `settleWithPermit`."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a direct payment's batch asks: the calls, and what they are about."""

    sender: str
    calldata: tuple[str, ...]
    """The plain `settle`'s calldata, then `settleWithPermit`'s when the payload carries a permit."""
    simulations: tuple[RpcCall, ...]
    calls: list[RpcCall]
    sponsored: Eip2612Permit | PaymentInvalidError | None
    """The extension's permit, its refusal if malformed (told only if it is needed), or None if absent."""


class Permit2Verifier:
    """Checks Permit2 payments for one chain, settled from `relayer` (`upto`: from whichever of
    `facilitators` the payer named). Safe for concurrent use."""

    def __init__(
        self,
        rpc: RpcClient,
        *,
        chain_id: int,
        relayer: str,
        facilitators: Iterable[str],
        fees: Callable[[], Awaitable[tuple[int, int]]],
        validity_margin_s: int = 6,
        gas_limit_cap: int = 300_000,
        erc6492_factories: Iterable[str] = (),
    ):
        self._rpc = rpc
        self._chain_id = chain_id
        self._relayer = relayer
        self._facilitators = frozenset(facilitators)
        self._fees = fees
        self._margin_s = validity_margin_s
        self._factories = frozenset(checksum_address(factory) for factory in erc6492_factories)
        self._clock = NodeClock(rpc, margin_s=validity_margin_s)
        self._gas = {
            scheme: TransferGas(
                rpc,
                relayer=relayer,
                cap=gas_limit_cap,
                target=proxy,
                refusal=settle_refusal(scheme),
                over_cap=SIMULATION_FAILED[scheme],
            )
            for scheme, proxy in PROXIES.items()
        }
        self.schemes: frozenset[str] = frozenset()
        """The schemes whose contracts this chain has (`probe`); none until probed."""

    async def probe(self) -> frozenset[str]:
        """Learn which schemes this chain can settle by Permit2: those whose proxy has code, Permit2 too.

        Raises:
            ChainError: the node could not be read.
        """
        self.schemes = await permit2_schemes(self._rpc)
        return self.schemes

    def check_offline(self, request: Permit2Request, *, now: int) -> Permit2Signature:
        """Every check that needs no chain (`check_permit2`) at unix time `now`; return who signed.

        Raises:
            PaymentInvalidError: the first rule broken, with its x402 reason.
        """
        payload = request.payment.payload
        return check_permit2(
            payload.permit2_authorization,
            payload.signature,
            request.terms,
            chain_id=self._chain_id,
            facilitators=self._facilitators,
            now=now,
            margin_s=self._margin_s,
        )

    async def check_unspent(self, request: Permit2Request) -> None:
        """Refuse a payment whose nonce Permit2 marks as used (the one chain check of a settlement of 0,
        which sends nothing).

        Raises:
            PaymentInvalidError: the nonce is used.
            ChainError: the chain could not be read.
        """
        auth = request.payment.payload.permit2_authorization
        call = {"to": PERMIT2_ADDRESS, "data": encode_nonce_bitmap(auth.from_address, auth.nonce)}
        check_nonce_unused(request.terms.scheme, await self._rpc.call("eth_call", call, "latest"), auth.nonce)

    async def check_onchain(
        self, request: Permit2Request, signed: Permit2Signature, *, now: int
    ) -> VerifiedPermit2:
        """The chain's checks of a payment `check_offline` passed as `signed`, judged at unix time `now`.

        Raises:
            PaymentInvalidError: a check failed.
            ChainError: the chain could not be read.
        """
        fees = Fees(*await self._fees())
        try:
            return await self._check(request, signed, fees, now)
        except RelayerCannotPayError as exc:
            logger.warning(
                "the relayer's balance does not cover a simulation at its fees (%s): without them", exc
            )
            return await self._check(request, signed, NO_FEES, now)

    async def _check(
        self, request: Permit2Request, signed: Permit2Signature, fees: Fees, now: int
    ) -> VerifiedPermit2:
        """`check_onchain` at `fees`.

        Raises:
            RelayerCannotPayError: the node would not simulate at `fees` for the sender's balance.
        """
        gas = self._gas[request.terms.scheme]
        if signed.factory is not None:
            payer = request.payment.payload.permit2_authorization.from_address
            if not is_contract(await self._rpc.call("eth_getCode", payer, "latest")):
                return await check_counterfactual(
                    self._rpc,
                    gas,
                    request,
                    signed,
                    fees,
                    now=now,
                    margin_s=self._margin_s,
                    factories=self._factories,
                )
        plan = self._plan(request, signed, fees)
        # One at a time while the settlement's gas is unknown: see `TransferGas.learning`.
        async with gas.learning(request.terms.asset, signed.eoa):
            replies = await self._rpc.batch(plan.calls)
            chosen = self._judge(request, signed, plan, replies, fees, now)
            payer_code = replies[3]
            simulated = replies[READS + 1 + chosen]
            if isinstance(simulated, RpcError):
                # A node simulating behind the wall clock (`_lagging_clock`), as for EIP-3009.
                simulated = await self._clock.simulate_at_wall_clock(
                    plan.simulations[chosen],
                    simulated,
                    valid_after=request.payment.payload.permit2_authorization.witness.valid_after,
                    now=now,
                    readable=chosen == _PLAIN and signed.eoa and not is_contract(payer_code),
                    refusal_of=settle_refusal(request.terms.scheme, with_permit=chosen == _WITH_PERMIT),
                )
            estimate = await self._estimate(request, signed, plan, chosen, payer_code, simulated, fees)
        gas.check_cap(estimate, what="the settlement needs")
        auth, terms = request.payment.payload.permit2_authorization, request.terms
        return VerifiedPermit2(
            scheme=terms.scheme,
            payer=auth.from_address,
            asset=terms.asset,
            nonce=auth.nonce,
            deadline=auth.deadline,
            amount=terms.settle_amount,
            target=PROXIES[terms.scheme],
            calldata=plan.calldata[chosen],
            gas_estimate=estimate,
            sender=plan.sender if terms.scheme == "upto" else None,
            with_eip2612=chosen == _WITH_PERMIT,
            code_hash=wallet_code_hash(payer_code),
        )

    def _plan(self, request: Permit2Request, signed: Permit2Signature, fees: Fees) -> _Plan:
        """The batch of a payment the proxy settles directly (from an EOA or a wallet with code): the reads,
        the head, the simulations, and a contract signer's ERC-1271 answer, asked as Permit2 asks it."""
        auth, terms = request.payment.payload.permit2_authorization, request.terms
        gas = self._gas[terms.scheme]
        sender = auth.witness.facilitator if isinstance(auth, UptoPermit2Authorization) else self._relayer
        try:
            sponsored: Eip2612Permit | PaymentInvalidError | None = read_eip2612(request.payment.extensions)
        except PaymentInvalidError as exc:
            sponsored = exc
        calldata = [encode_settle(auth, terms.settle_amount, signed.signature)]
        simulations = [gas.simulation(terms.asset, calldata[_PLAIN], signed.eoa, fees, sender=sender)]
        if isinstance(sponsored, Eip2612Permit):
            calldata.append(encode_settle(auth, terms.settle_amount, signed.signature, sponsored.approval))
            # Estimated every time: the permit's cost is not the plain settlement's.
            simulations.append(
                gas.simulation(terms.asset, calldata[_WITH_PERMIT], False, fees, sender=sender)
            )
        calls = [*permit2_reads(request), HEAD_BLOCK, *simulations]
        if not signed.eoa:
            check = encode_is_valid_signature(signed.digest, signed.signature)
            wallet = gas.call(auth.from_address, check, fees, gas=gas.cap, sender=sender)
            calls.append(RpcCall("eth_call", [wallet, "latest"]))
        return _Plan(sender, tuple(calldata), tuple(simulations), calls, sponsored)

    def _judge(
        self,
        request: Permit2Request,
        signed: Permit2Signature,
        plan: _Plan,
        replies: list[Any],
        fees: Fees,
        now: int,
    ) -> int:
        """Refuse on the replies of `plan`, in the order of the module docstring, but the simulation's own
        failure; return which simulation the settlement sends (`_PLAIN` or `_WITH_PERMIT`)."""
        auth, terms = request.payment.payload.permit2_authorization, request.terms
        scheme = terms.scheme
        reads, head, answers = replies[:READS], replies[READS], replies[READS + 1 :]
        if fees != NO_FEES and any(unaffordable(reply) for reply in answers):
            raise RelayerCannotPayError(str(next(reply for reply in answers if unaffordable(reply))))
        check_contracts(PROXIES[scheme], terms.asset, reads[:3])
        payer_code, balance, allowance, bitmap = reads[3:]
        if not signed.eoa and (not is_contract(payer_code) or not is_erc1271_magic(answers[-1])):
            raise PaymentInvalidError(
                Reason.INVALID_PERMIT2_SIGNATURE, "the signature is not from permit2Authorization.from"
            )
        check_nonce_unused(scheme, bitmap, auth.nonce)
        chosen = _PLAIN
        # What this settlement moves: the permitted amount, but an `upto` settlement's charge when settling.
        needed = terms.settle_amount
        approved = erc20_amount(scheme, allowance, "the payer's allowance to Permit2")
        if approved < needed:
            if not isinstance(plan.sponsored, Eip2612Permit):
                raise plan.sponsored or allowance_required(
                    f"the payer's allowance to Permit2 is {approved}, below the {needed} to settle"
                )
            check_eip2612(
                plan.sponsored,
                payer=auth.from_address,
                asset=terms.asset,
                permitted=auth.permitted.amount,
                now=now,
                margin_s=self._margin_s,
            )
            chosen = _WITH_PERMIT
        check_balance(scheme, balance, needed)
        check_head_time(auth.deadline, head, now, self._margin_s, expired=Reason.PERMIT2_DEADLINE_EXPIRED)
        return chosen

    async def _estimate(
        self,
        request: Permit2Request,
        signed: Permit2Signature,
        plan: _Plan,
        chosen: int,
        payer_code: object,
        simulated: str | None,
        fees: Fees,
    ) -> int:
        """The gas of the settlement chosen, from its simulation (None: the node could not simulate it at
        the wall clock's time, and what such settlements are known to cost stands in)."""
        gas, asset = self._gas[request.terms.scheme], request.terms.asset
        if simulated is None:
            return gas.unsimulated(asset)
        if chosen == _WITH_PERMIT:
            return int(simulated, 16)
        calldata = plan.calldata[_PLAIN]
        return await gas.estimate(
            asset, calldata, signed.eoa, payer_code, simulated, fees, sender=plan.sender
        )
