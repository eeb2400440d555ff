"""The Permit2 payments of `/verify` and `/settle` (`exact` by Permit2, and `upto`): verified, and read into
a `Presented` that `Settlement` settles as it does an EIP-3009 authorization.

A settle is checked again in full, as its requirements ask (`settling`: an `upto` one names the amount to
charge, at most the maximum the payer permitted): the settlement simulated is the one sent. An `upto`
settlement of 0 moves nothing and sends nothing (x402's `upto` scheme: the authorization is left to expire);
it is still claimed, so the same authorization is never settled again here, after the checks that need no
transaction: the payer's signature for these terms, and its nonce unused in Permit2.

Its claim's key names Permit2 and the payer's nonce (`permit2_claim_key`); it is valid before the second
after the permit's deadline (Permit2 accepts a block stamped at the deadline itself).
"""

from __future__ import annotations

import time

from ._claims import ClaimKey
from ._permit2_verified import PROXIES, VerifiedPermit2, permit2_claim_key
from ._permit2_verify import Permit2Verifier
from ._presented import Presented
from ._request import Permit2Request, read_permit2_payment
from ._reverts import RevertGuard
from .wire import PaymentRequirements, Permit2PaymentPayload, UptoPermit2Authorization

__all__ = ["Permit2Payments"]


class Permit2Payments:
    """Verifies Permit2 payments on one chain and presents them for settlement. Safe for concurrent use."""

    def __init__(self, verifier: Permit2Verifier, guard: RevertGuard, *, chain_id: int, network: str):
        self._verifier = verifier
        self._guard = guard
        self._chain_id = chain_id
        self._network = network

    @property
    def schemes(self) -> frozenset[str]:
        """The schemes whose contracts this chain has (`Permit2Verifier.probe`); none until probed."""
        return self._verifier.schemes

    async def probe(self) -> frozenset[str]:
        """Learn which schemes this chain can settle by Permit2 (`Permit2Verifier.probe`).

        Raises:
            ChainError: the node could not be read.
        """
        return await self._verifier.probe()

    async def verify(
        self, payment: Permit2PaymentPayload, requirements: PaymentRequirements
    ) -> VerifiedPermit2:
        """Every check of a `/verify` of `payment` against `requirements` (an `upto` one's are its maximum).

        Raises:
            PaymentInvalidError: a check failed.
            ChainError: the chain could not be read.
        """
        return await self._checked(read_permit2_payment(payment, requirements, self._network))

    def presented(self, payment: Permit2PaymentPayload, requirements: PaymentRequirements) -> Presented:
        """`payment` as a settle against `requirements` presents it; its `check` verifies it again.

        Raises:
            PaymentInvalidError: the terms are not the payment's (`permit2_terms`), or another network.
        """
        request = read_permit2_payment(payment, requirements, self._network, settling=True)
        auth, terms = payment.payload.permit2_authorization, request.terms
        sender = auth.witness.facilitator if isinstance(auth, UptoPermit2Authorization) else None
        nothing = sender is not None and terms.settle_amount == 0
        return Presented(
            key=self.claim_key(payment),
            payer=auth.from_address,
            pay_to=terms.pay_to,
            token=terms.asset,
            amount=terms.settle_amount,
            valid_before=auth.deadline + 1,
            payload_hash=request.payload_hash,
            sender=sender,
            check=(lambda: self._unspent(request)) if nothing else (lambda: self._checked(request)),
            sends_nothing=nothing,
        )

    def claim_key(self, payment: Permit2PaymentPayload) -> ClaimKey:
        """The key `payment`'s settlement is claimed under."""
        auth = payment.payload.permit2_authorization
        return permit2_claim_key(self._chain_id, auth.from_address, auth.nonce)

    async def _checked(self, request: Permit2Request) -> VerifiedPermit2:
        """Every check of `request`, offline then on chain, then its payer's and wallet's cool-off."""
        # One moment of the wall clock for both halves, as for EIP-3009.
        now = int(time.time())
        signed = self._verifier.check_offline(request, now=now)
        verified = await self._verifier.check_onchain(request, signed, now=now)
        await self._guard.check_cooling(verified.payer, verified.code_hash)
        return verified

    async def _unspent(self, request: Permit2Request) -> VerifiedPermit2:
        """The checks of an `upto` settlement of 0: the payer signed these terms, and the nonce is unused.
        What it hands settlement sends nothing."""
        self._verifier.check_offline(request, now=int(time.time()))
        await self._verifier.check_unspent(request)
        auth = request.payment.payload.permit2_authorization
        return VerifiedPermit2(
            scheme=request.terms.scheme,
            payer=auth.from_address,
            asset=request.terms.asset,
            nonce=auth.nonce,
            deadline=auth.deadline,
            amount=0,
            target=PROXIES[request.terms.scheme],
            calldata="0x",
            gas_estimate=0,
            sender=auth.witness.facilitator if isinstance(auth, UptoPermit2Authorization) else None,
        )
