"""The settle of one payment: from the request to the claim, and every way a known claim is answered.

Either transfer method (`Presented`: an EIP-3009 authorization, or a Permit2 witness transfer). An existing
claim for the authorization or the idempotency key short-circuits to its answer (before any clock check, so
a retry after `validBefore` still gets it); otherwise the payment is verified, claimed durably, and handed
to `Outcomes` to broadcast; an `upto` settlement of 0 is claimed and answered settled, sending nothing. An
`upto` settlement goes only from the key its payer named: refused before its claim when this process does
not hold that key. A payer (or wallet code) whose settlement reverted on chain
is refused while it cools off, and no new settlement is claimed while every relayer key this process holds
has spent its budget for reverts (`_reverts`): both before anything is claimed or sent. A released claim
(nothing sent, or a revert that left the authorization unused) or an abandoned one (its owner vanished
before broadcasting) is settled again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from ._answers import CHAIN_DOWN, Answers, read_within, remaining
from ._claims import Claim, ClaimKey, ClaimState, ClaimStore
from ._elsewhere import SettledElsewhere
from ._errors import ChainError, IdempotencyConflictError, PaymentInvalidError
from ._nonce_state import authorization_used
from ._outcome import Outcomes
from ._presented import Presented, Sendable
from ._receipts import Receipt
from ._records import ClaimRecords
from ._request import PaymentRequest
from ._reverts import RevertGuard, RevertRefusalError
from ._rpc import RpcClient
from ._verify import VerifiedPayment, Verifier
from .wire import Reason, SettleResponse

__all__ = ["Settlement"]

logger = logging.getLogger(__name__)


class Settlement:
    """Verifies, claims and answers settles; the broadcast and its outcome belong to `Outcomes`."""

    def __init__(
        self,
        *,
        rpc: RpcClient,
        claims: ClaimStore,
        verifier: Verifier,
        outcomes: Outcomes,
        elsewhere: SettledElsewhere,
        records: ClaimRecords,
        answers: Answers,
        network: str,
        chain_id: int,
        guard: RevertGuard,
        relayers: Callable[[], Iterable[str]],
        holds: Callable[[str], bool],
    ):
        self._rpc = rpc
        self._claims = claims
        self._verifier = verifier
        self._outcomes = outcomes
        self._elsewhere = elsewhere
        self._records = records
        self._answers = answers
        self._network = network
        self._chain_id = chain_id
        self._guard = guard
        self._relayers = relayers
        self._holds = holds

    def claim_key(self, request: PaymentRequest) -> ClaimKey:
        """The key under which the EIP-3009 authorization of `request` is claimed."""
        auth = request.authorization
        return ClaimKey(self._chain_id, request.terms.asset, auth.from_, "0x" + auth.nonce.hex())

    def presented(self, request: PaymentRequest) -> Presented:
        """The EIP-3009 payment of `request`, as `settle` takes it."""
        auth, terms = request.authorization, request.terms
        return Presented(
            key=self.claim_key(request),
            payer=auth.from_,
            pay_to=terms.pay_to,
            token=terms.asset,
            amount=terms.amount,
            valid_before=auth.valid_before,
            payload_hash=request.payload_hash,
            sender=None,
            check=lambda: self.verify(request),
        )

    async def verify(self, request: PaymentRequest) -> VerifiedPayment:
        """Every check of `request`, offline then on chain, then its payer's and wallet's cool-off.

        Raises:
            PaymentInvalidError: a check failed.
            ChainError: the chain could not be read.
        """
        # One moment of the wall clock for both halves: it, not the head block, decides the validity window.
        now = int(time.time())
        eoa = self._verifier.check_offline(request.authorization, request.terms, now=now)
        verified = await self._verifier.check_onchain(
            request.authorization, request.terms, eoa_signature=eoa, now=now
        )
        # After the chain's checks, so a payment the chain refuses anyway keeps that reason (a used nonce
        # of a released claim is someone else's settlement to record, not a cool-off).
        await self._guard.check_cooling(request.authorization.from_, verified.code_hash)
        return verified

    async def _refuse_if_spent_out(self) -> None:
        """Refuse a new settlement while every relayer key of this process spent its budget for reverts.

        Raises:
            PaymentInvalidError: no key has budget left.
        """
        held = list(self._relayers())
        await self._guard.refresh(held)
        self._guard.refuse_if_spent_out(held)

    async def settle(
        self, presented: Presented, key_text: str | None, deadline: float, presented_at: int | None
    ) -> SettleResponse:
        """Settle `presented` at most once, answering within `deadline`; see `Facilitator.settle`."""
        key, payer = presented.key, presented.payer
        try:
            verified = await self._verify_within(presented, deadline)
        except PaymentInvalidError as exc:
            # Most refusals of a known authorization are its own earlier settlement (nonce now used, time
            # run out): the claim, not the chain, holds the answer. Looked up only here, off the happy path.
            existing = await self._claims.find(key, key_text)
            if existing is not None and not _retry_refused(exc, existing, presented):
                return await self._answer_existing(existing, presented, key_text, deadline)
            if exc.reason == presented.nonce_used:
                front_run = await self._front_run(presented, key_text, deadline, presented_at)
                if front_run is not None:
                    return front_run
            return self._answers.failure(exc.reason, exc.message, payer)
        except ChainError as exc:
            logger.warning("settle could not reach the chain: %s", exc)
            # A settlement already under way is answered from its claim (pending, with its transaction),
            # never as a failure: its transaction may be mined while the chain cannot be read.
            existing = await self._claims.find(key, key_text)
            if existing is not None:
                return await self._answer_existing(existing, presented, key_text, deadline)
            return self._answers.failure(Reason.UNEXPECTED_SETTLE_ERROR, CHAIN_DOWN, payer)
        try:
            await self._refuse_unsendable(presented)
        except PaymentInvalidError as exc:
            existing = await self._claims.find(key, key_text)
            if existing is not None and not _retry_refused(exc, existing, presented):
                return await self._answer_existing(existing, presented, key_text, deadline)
            return self._answers.failure(exc.reason, exc.message, payer)
        claim, created = await self._claim(presented, key_text)
        if not created:
            return await self._answer_existing(claim, presented, key_text, deadline)
        return await self._send(claim, presented, verified, deadline)

    async def status(self, presented: Presented, timeout_s: float) -> SettleResponse | None:
        """The answer of `presented`'s claim, finishing a pending one within `timeout_s`; None if none."""
        claim = await self._claims.by_key(presented.key)
        if claim is None:
            return None
        if claim.state is ClaimState.BROADCAST:
            return await self._outcomes.wait(claim, time.monotonic() + timeout_s)
        if claim.response is not None:
            return SettleResponse.from_wire(claim.response)
        return self._answers.pending(claim)

    async def _send(
        self, claim: Claim, presented: Presented, verified: Sendable, deadline: float
    ) -> SettleResponse:
        """Broadcast the claimed settlement; one of 0 has nothing to send and is settled as it is claimed."""
        if presented.sends_nothing:
            logger.info("claim %s settled for 0: nothing sent", claim.id)
            return await self._records.nothing_moved(claim)
        return await self._outcomes.broadcast(claim, verified, deadline, sender=presented.sender)

    async def _refuse_unsendable(self, presented: Presented) -> None:
        """Refuse a settlement no key of this process may send: the key an `upto` payer named is not held
        here, or every key held spent its budget for reverts. A settlement of 0 sends nothing.

        Raises:
            PaymentInvalidError: it cannot be sent from here.
        """
        if presented.sends_nothing:
            return
        if presented.sender is not None and not self._holds(presented.sender):
            raise PaymentInvalidError(
                Reason.UPTO_FACILITATOR_MISMATCH,
                f"witness.facilitator {presented.sender} is a relayer key this process of the facilitator "
                "does not hold now (another process holds it): settle there, or again later",
            )
        await self._refuse_if_spent_out()

    async def _verify_within(self, presented: Presented, deadline: float) -> Sendable:
        """Every check of `presented`, cut short at the deadline."""
        return await read_within(presented.check(), deadline)

    async def _claim(self, presented: Presented, key_text: str | None) -> tuple[Claim, bool]:
        """Claim the authorization of `presented` (`ClaimStore.claim`): (claim, True) if this call made it."""
        return await self._claims.claim(
            presented.key,
            idempotency_key=key_text,
            payload_hash=presented.payload_hash,
            network=self._network,
            pay_to=presented.pay_to,
            amount=presented.amount,
            valid_before=presented.valid_before,
            token=presented.claim_token,
        )

    async def _answer_existing(
        self, claim: Claim, presented: Presented, key_text: str | None, deadline: float
    ) -> SettleResponse:
        """Answer a settle of an authorization (or idempotency key) that already has a claim."""
        same_key = key_text is not None and claim.idempotency_key == key_text
        if same_key and (claim.key != presented.key or claim.payload_hash != presented.payload_hash):
            raise IdempotencyConflictError("this idempotency key was first used for a different payment")
        if claim.state is ClaimState.RELEASED or await self._abandoned(claim):
            retried = await self._retry(claim, presented, key_text, deadline)
            if retried is not None:
                return retried
            claim = await self._claims.get(claim.id) or claim
        if claim.state is ClaimState.CLAIMED:
            # Another settle owns this authorization and is about to broadcast: wait for its transaction
            # (or its failure) so the answer can name it.
            attempt = claim.attempt
            progressed = await self._claims.wait_for(
                claim.id,
                lambda c: c.attempt != attempt or c.state is not ClaimState.CLAIMED,
                remaining(deadline),
            )
            if progressed is None:
                return self._answers.pending(claim) if same_key else self._answers.duplicate(claim)
            claim = progressed
            if claim.state is ClaimState.RELEASED and claim.response is not None:
                # The attempt we waited for failed before broadcasting: that is our answer too.
                return SettleResponse.from_wire(claim.response)
        if not same_key:
            return self._answers.duplicate(claim)
        if claim.state is ClaimState.BROADCAST:
            return await self._outcomes.wait(claim, deadline)
        if claim.response is None:
            return self._answers.pending(claim)
        return SettleResponse.from_wire(claim.response)

    async def _retry(
        self, claim: Claim, presented: Presented, key_text: str | None, deadline: float
    ) -> SettleResponse | None:
        """Settle again an authorization whose claim was released (nothing sent, or a transaction that
        reverted without using it), or record someone else's settlement of it; None if another took it."""
        payer = presented.payer
        try:
            verified = await self._verify_within(presented, deadline)
            await self._refuse_unsendable(presented)
        except PaymentInvalidError as exc:
            refused = self._answers.failure(exc.reason, exc.message, payer)
            if exc.reason != presented.nonce_used:
                return refused
            # Used since: our reverted transaction made it public, and someone may have paid the payee.
            found = await self._elsewhere.settled(presented, claim, deadline)
            if not isinstance(found, Receipt):
                return found or refused
            taken = await self._take_over(claim, presented, key_text)
            if taken is None:
                return None
            logger.info("claim %s was settled by someone else's transaction %s", taken.id, found.tx_hash)
            return await self._records.success(taken, found.tx_hash, found.block_number, found.block_hash)
        except ChainError:
            return self._answers.failure(Reason.UNEXPECTED_SETTLE_ERROR, CHAIN_DOWN, payer)
        taken = await self._take_over(claim, presented, key_text)
        if taken is None:
            return None
        logger.info("claim %s retaken for attempt %d", taken.id, taken.attempt)
        return await self._send(taken, presented, verified, deadline)

    async def _take_over(self, claim: Claim, presented: Presented, key_text: str | None) -> Claim | None:
        # The attempt moves what this settle asks (an `upto` one may ask another amount than the first).
        amount = presented.amount
        # A retry without a key keeps the first caller's key, so that caller can still ask with it.
        if key_text is None:
            return await self._claims.take_over(
                claim, idempotency_key=claim.idempotency_key, payload_hash=claim.payload_hash, amount=amount
            )
        return await self._claims.take_over(
            claim, idempotency_key=key_text, payload_hash=presented.payload_hash, amount=amount
        )

    async def _front_run(
        self, presented: Presented, key_text: str | None, deadline: float, presented_at: int | None
    ) -> SettleResponse | None:
        """Success with someone else's transaction, if it used this very authorization to pay the payee
        after the caller took the payment.

        When that happened after the caller took it but before we claimed it, the payer paid the payee
        exactly once and the settlement is theirs, if foreign transactions count here (`SettledElsewhere`;
        otherwise it is refused naming it). It is claimed and recorded like ours, so the same authorization
        presented again is a duplicate. A transaction mined before `presented_at`, or with no
        `presented_at` to compare, may be a payment made through another channel whose public calldata was
        copied for a new purchase: refused, naming it. None when the nonce was used otherwise (cancelled,
        or another authorization with the same nonce): a refusal stands.
        """
        settled = await self._elsewhere.find(presented, deadline)
        if settled is None:
            return None
        payer, reason = presented.payer, presented.nonce_used
        if presented_at is None:
            return self._answers.used_elsewhere(payer, settled, reason=reason)
        if not self._elsewhere.counted(settled, None):
            # Nothing was claimed here: the transaction may be another deployment's settlement of this
            # authorization for its own purchase, which must not be delivered a second time here.
            return self._elsewhere.foreign(payer, settled, reason)
        try:
            if not await self._elsewhere.mined_since(settled, presented_at, deadline):
                return self._answers.used_elsewhere(payer, settled, reason=reason)
        except ChainError as exc:
            logger.warning("settle could not date a front-running transaction: %s", exc)
            return self._answers.failure(Reason.UNEXPECTED_SETTLE_ERROR, CHAIN_DOWN, payer)
        found = await self._elsewhere.confirmed(payer, settled, deadline)
        if not isinstance(found, Receipt):
            return found
        claim, created = await self._claim(presented, key_text)
        if not created:
            return await self._answer_existing(claim, presented, key_text, deadline)
        logger.info("claim %s was settled by someone else's transaction %s", claim.id, found.tx_hash)
        return await self._records.success(claim, found.tx_hash, found.block_number, found.block_hash)

    async def _abandoned(self, claim: Claim) -> bool:
        """Whether a `claimed` claim's owner vanished before broadcasting (lease over, nonce unused)."""
        if claim.state is not ClaimState.CLAIMED or not claim.lease_expired:
            return False
        try:
            used = await authorization_used(self._rpc, claim.asset, claim.payer, claim.nonce, "pending")
        except ChainError:
            # Unknown: the owner may have broadcast it; never risk a second transaction.
            return False
        return not used


def _retry_refused(exc: PaymentInvalidError, claim: Claim, presented: Presented) -> bool:
    """Whether `claim` is this very payment's released claim, and `exc` a refusal for reverts (a cool-off,
    a spent budget) that its retry would only meet again (refused once, and counted and logged once)."""
    return (
        isinstance(exc, RevertRefusalError)
        and claim.state is ClaimState.RELEASED
        and claim.payload_hash == presented.payload_hash
    )
