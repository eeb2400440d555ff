"""The settle of one payment: from the request to the claim, and every way a known claim is answered.

An existing claim for the authorization or the idempotency key short-circuits to its answer (before any
clock check, so a retry after `validBefore` still gets it); otherwise the payment is verified, claimed
durably, and handed to `Outcomes` to broadcast. A payer (or wallet code) whose settlement reverted on chain
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
from ._outcome import Outcomes
from ._receipts import Receipt
from ._records import ClaimRecords
from ._request import PaymentRequest
from ._reverts import RevertGuard, RevertRefusalError
from ._rpc import RpcClient
from ._token import decode_bool, encode_authorization_state
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

    def claim_key(self, request: PaymentRequest) -> ClaimKey:
        """The key under which the authorization of `request` is claimed."""
        auth = request.authorization
        return ClaimKey(self._chain_id, request.terms.asset, auth.from_, "0x" + auth.nonce.hex())

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
        self, request: PaymentRequest, key_text: str | None, deadline: float, presented_at: int | None
    ) -> SettleResponse:
        """Settle `request` at most once, answering within `deadline`; see `Facilitator.settle`."""
        key = self.claim_key(request)
        try:
            verified = await self._verify_within(request, deadline)
        except PaymentInvalidError as exc:
            # Most refusals of a known authorization are its own earlier settlement (nonce now used, time
            # run out): the claim, not the chain, holds the answer. Looked up only here, off the happy path.
            existing = await self._claims.find(key, key_text)
            if existing is not None and not _retry_refused(exc, existing, request):
                return await self._answer_existing(existing, request, key_text, deadline)
            if exc.reason == Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED:
                front_run = await self._front_run(request, key_text, deadline, presented_at)
                if front_run is not None:
                    return front_run
            return self._answers.failure(exc.reason, exc.message, request.authorization.from_)
        except ChainError as exc:
            logger.warning("settle could not reach the chain: %s", exc)
            # A settlement already under way is answered from its claim (pending, with its transaction),
            # never as a failure: its transaction may be mined while the chain cannot be read.
            existing = await self._claims.find(key, key_text)
            if existing is not None:
                return await self._answer_existing(existing, request, key_text, deadline)
            payer = request.authorization.from_
            return self._answers.failure(Reason.UNEXPECTED_SETTLE_ERROR, CHAIN_DOWN, payer)
        try:
            await self._refuse_if_spent_out()
        except PaymentInvalidError as exc:
            existing = await self._claims.find(key, key_text)
            if existing is not None and not _retry_refused(exc, existing, request):
                return await self._answer_existing(existing, request, key_text, deadline)
            return self._answers.failure(exc.reason, exc.message, request.authorization.from_)
        claim, created = await self._claim(request, key_text)
        if not created:
            return await self._answer_existing(claim, request, key_text, deadline)
        return await self._outcomes.broadcast(claim, verified, deadline)

    async def _verify_within(self, request: PaymentRequest, deadline: float) -> VerifiedPayment:
        """`verify`, cut short at the deadline."""
        return await read_within(self.verify(request), deadline)

    async def _claim(self, request: PaymentRequest, key_text: str | None) -> tuple[Claim, bool]:
        """Claim the authorization of `request` (`ClaimStore.claim`): (claim, True) if this call made it."""
        return await self._claims.claim(
            self.claim_key(request),
            idempotency_key=key_text,
            payload_hash=request.payload_hash,
            network=self._network,
            pay_to=request.terms.pay_to,
            amount=request.terms.amount,
            valid_before=request.authorization.valid_before,
        )

    async def _answer_existing(
        self, claim: Claim, request: PaymentRequest, key_text: str | None, deadline: float
    ) -> SettleResponse:
        """Answer a settle of an authorization (or idempotency key) that already has a claim."""
        same_key = key_text is not None and claim.idempotency_key == key_text
        if same_key and (claim.key != self.claim_key(request) or claim.payload_hash != request.payload_hash):
            raise IdempotencyConflictError("this idempotency key was first used for a different payment")
        if claim.state is ClaimState.RELEASED or await self._abandoned(claim):
            retried = await self._retry(claim, request, key_text, deadline)
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
        self, claim: Claim, request: PaymentRequest, key_text: str | None, deadline: float
    ) -> SettleResponse | None:
        """Settle again an authorization whose claim was released (nothing sent, or a transaction that
        reverted without using it), or record someone else's settlement of it; None if another took it."""
        payer = request.authorization.from_
        try:
            verified = await self._verify_within(request, deadline)
            await self._refuse_if_spent_out()
        except PaymentInvalidError as exc:
            refused = self._answers.failure(exc.reason, exc.message, payer)
            if exc.reason != Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED:
                return refused
            # Used since: our reverted transaction made it public, and someone may have paid the payee.
            found = await self._elsewhere.settled(request, claim, deadline)
            if not isinstance(found, Receipt):
                return found or refused
            taken = await self._take_over(claim, request, key_text)
            if taken is None:
                return None
            logger.info("claim %s was settled by someone else's transaction %s", taken.id, found.tx_hash)
            return await self._records.success(taken, found.tx_hash, found.block_number, found.block_hash)
        except ChainError:
            return self._answers.failure(Reason.UNEXPECTED_SETTLE_ERROR, CHAIN_DOWN, payer)
        taken = await self._take_over(claim, request, key_text)
        if taken is None:
            return None
        logger.info("claim %s retaken for attempt %d", taken.id, taken.attempt)
        return await self._outcomes.broadcast(taken, verified, deadline)

    async def _take_over(self, claim: Claim, request: PaymentRequest, key_text: str | None) -> Claim | None:
        # A retry without a key keeps the first caller's key, so that caller can still ask with it.
        if key_text is None:
            return await self._claims.take_over(
                claim, idempotency_key=claim.idempotency_key, payload_hash=claim.payload_hash
            )
        return await self._claims.take_over(
            claim, idempotency_key=key_text, payload_hash=request.payload_hash
        )

    async def _front_run(
        self, request: PaymentRequest, key_text: str | None, deadline: float, presented_at: int | None
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
        settled = await self._elsewhere.find(request, deadline)
        if settled is None:
            return None
        auth = request.authorization
        if presented_at is None:
            return self._answers.used_elsewhere(auth.from_, settled)
        if not self._elsewhere.counted(settled, None):
            # Nothing was claimed here: the transaction may be another deployment's settlement of this
            # authorization for its own purchase, which must not be delivered a second time here.
            return self._elsewhere.foreign(auth.from_, settled)
        try:
            if not await self._elsewhere.mined_since(settled, presented_at, deadline):
                return self._answers.used_elsewhere(auth.from_, settled)
        except ChainError as exc:
            logger.warning("settle could not date a front-running transaction: %s", exc)
            return self._answers.failure(Reason.UNEXPECTED_SETTLE_ERROR, CHAIN_DOWN, auth.from_)
        found = await self._elsewhere.confirmed(request, settled, deadline)
        if not isinstance(found, Receipt):
            return found
        claim, created = await self._claim(request, key_text)
        if not created:
            return await self._answer_existing(claim, request, key_text, deadline)
        logger.info("claim %s was settled by someone else's transaction %s", claim.id, found.tx_hash)
        return await self._records.success(claim, found.tx_hash, found.block_number, found.block_hash)

    async def _abandoned(self, claim: Claim) -> bool:
        """Whether a `claimed` claim's owner vanished before broadcasting (lease over, nonce unused)."""
        if claim.state is not ClaimState.CLAIMED or not claim.lease_expired:
            return False
        try:
            used = await self._rpc.call(
                "eth_call",
                {
                    "to": claim.asset,
                    "data": encode_authorization_state(claim.payer, bytes.fromhex(claim.nonce[2:])),
                },
                "pending",
            )
        except ChainError:
            # Unknown: the owner may have broadcast it; never risk a second transaction.
            return False
        return not decode_bool(used)


def _retry_refused(exc: PaymentInvalidError, claim: Claim, request: PaymentRequest) -> bool:
    """Whether `claim` is this very payment's released claim, and `exc` a refusal for reverts (a cool-off,
    a spent budget) that its retry would only meet again (refused once, and counted and logged once)."""
    return (
        isinstance(exc, RevertRefusalError)
        and claim.state is ClaimState.RELEASED
        and claim.payload_hash == request.payload_hash
    )
