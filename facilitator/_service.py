"""The facilitator core: verify and settle exact-scheme EIP-3009 payments on one EVM chain, exactly once.

This is the one implementation behind both the HTTP service and the merchant's in-process use. Its
answers are x402 v2 `VerifyResponse` / `SettleResponse` documents; a payment that fails a check is an
answer (`isValid: false`, `success: false`), never an exception.

Settling, in order: reading the request; an existing claim for the authorization or the idempotency key
short-circuits to its answer (before any clock check, so a retry after `validBefore` still gets it); the
checks without chain access; chain checks in one RPC batch; the durable claim; the broadcast; a bounded
wait for the receipt at the configured depth. A settlement still unconfirmed at the deadline is answered
`settlement_pending` with its transaction hash; a later settle with the same idempotency key, or a status
call, finishes it (first checking that the transaction is still in the pool, and sending it again if not).
Every chain wait of a settle keeps to the caller's budget, even on a node that stops answering. Every
answer about a claim is the one stored with it, so repeated answers are identical.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import Any, Self, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from storage import create_engine, ensure_schema_current

from ._claims import Claim, ClaimKey, ClaimState, ClaimStore
from ._config import FacilitatorSettings
from ._errors import (
    ChainError,
    ChainMismatchError,
    ChainUnavailableError,
    IdempotencyConflictError,
    PaymentInvalidError,
    RpcError,
)
from ._receipts import Receipt, ReceiptWatcher
from ._recovery import Recovery, ThirdPartySettlement, find_settlement
from ._relayer import BroadcastUncertainError, Relayer, SentTransaction
from ._request import PaymentRequest, idempotency_key_of, read_payment
from ._rpc import RpcCall, RpcClient
from ._token import decode_bool, encode_authorization_state, transfer_logs
from ._verify import VerifiedPayment, Verifier
from .wire import (
    PaymentPayload,
    PaymentRequirements,
    Reason,
    SettleResponse,
    SupportedKind,
    SupportedResponse,
    VerifyResponse,
    v1_network_from_chain_id,
)

__all__ = ["Facilitator"]

logger = logging.getLogger(__name__)

# A receipt usually arrives within a few blocks' time on a fast chain; past this, record the broadcast first.
_QUICK_RECEIPT_S = 0.25
_CHAIN_DOWN = "the chain could not be reached; try again"
# Each reverted attempt costs the relayer gas: a wallet that passes simulation and reverts on chain must not
# be able to make it pay again and again for one authorization.
MAX_SETTLE_ATTEMPTS = 3
# Someone else's transaction counts as the settlement of a payment only if it was mined after the caller
# took the payment; block timestamps and the caller's clock may disagree by this much (a rollup stamps a
# block with the start of its slot, and hosts' clocks drift).
_PRESENTED_SKEW_S = 5

_T = TypeVar("_T")


class Facilitator:
    """Verifies and settles payments on the chain of its RPC node. Safe for concurrent use."""

    def __init__(
        self,
        *,
        rpc: RpcClient,
        claims: ClaimStore,
        relayer: Relayer,
        network: str,
        confirmations: int = 1,
        receipt_timeout_s: float = 20.0,
        validity_margin_s: int = 6,
        gas_limit_cap: int = 300_000,
        receipt_poll_s: float = 0.003,
    ):
        self.network = network
        self.chain_id = int(network.split(":", 1)[1])
        self._rpc = rpc
        self._claims = claims
        self._relayer = relayer
        self._confirmations = confirmations
        self._receipt_timeout_s = receipt_timeout_s
        self._gas_limit_cap = gas_limit_cap
        self._verifier = Verifier(
            rpc,
            chain_id=self.chain_id,
            relayer=relayer.address,
            validity_margin_s=validity_margin_s,
            gas_limit_cap=gas_limit_cap,
        )
        self._watcher = ReceiptWatcher(rpc, poll_interval_s=receipt_poll_s)
        self._recovery = Recovery(rpc, claims, relayer)
        self._owned_engine: AsyncEngine | None = None
        self._database_url: str | None = None
        # Pool checks under way, by claim id; one that outlives its caller's budget is left to finish
        # (or cut short by `aclose`).
        self._pool_checks: dict[str, asyncio.Task[str | ThirdPartySettlement]] = {}

    @classmethod
    def from_settings(cls, settings: FacilitatorSettings, *, engine: AsyncEngine | None = None) -> Self:
        """Build a facilitator without network I/O (connections open on first use); see `startup_checks`.

        Call it at startup, not while serving: a relayer key given as a file path is read here.

        Raises:
            ValueError: no usable relayer key is configured.
        """
        rpc = RpcClient(settings.rpc_url, timeout_s=settings.rpc_timeout_s)
        owned = engine is None
        engine = engine or create_engine(settings.database_url)
        facilitator = cls(
            rpc=rpc,
            claims=ClaimStore(engine, lease_s=settings.claim_lease_s),
            relayer=Relayer(rpc, settings.relayer_private_key(), settings.chain_id),
            network=settings.network,
            confirmations=settings.confirmations,
            receipt_timeout_s=settings.receipt_timeout_s,
            validity_margin_s=settings.validity_margin_s,
            gas_limit_cap=settings.gas_limit_cap,
            receipt_poll_s=settings.receipt_poll_s,
        )
        facilitator._owned_engine = engine if owned else None
        facilitator._database_url = settings.database_url
        return facilitator

    @classmethod
    async def open(cls, settings: FacilitatorSettings, *, engine: AsyncEngine | None = None) -> Self:
        """`from_settings` then `startup_checks`: a facilitator ready to serve.

        Raises:
            ChainMismatchError: the node's eth_chainId is not the configured network's.
            ChainUnavailableError: the node could not be reached.
            storage.SchemaOutdatedError: the claim store was not migrated.
            ValueError: no usable relayer key is configured.
        """
        # The key may be a file path: build off the event loop.
        facilitator = await asyncio.to_thread(cls.from_settings, settings, engine=engine)
        try:
            await facilitator.startup_checks()
        except BaseException:
            await facilitator.aclose()
            raise
        return facilitator

    async def startup_checks(self) -> None:
        """Refuse to serve on a wrong chain or an outdated claim store.

        Raises:
            ChainMismatchError: the node's eth_chainId is not the configured network's.
            ChainUnavailableError: the node could not be reached.
            storage.SchemaOutdatedError: the claim store was not migrated.
        """
        if self._database_url is not None:
            await ensure_schema_current(self._database_url, "facilitator")
        node_chain_id = int(await self._rpc.call("eth_chainId"), 16)
        if node_chain_id != self.chain_id:
            raise ChainMismatchError(
                f"the RPC node serves chain {node_chain_id}, but X402_NETWORK is {self.network}"
            )

    async def aclose(self) -> None:
        """Stop background work and close connections this facilitator opened."""
        checks = list(self._pool_checks.values())
        for task in checks:
            task.cancel()
        await asyncio.gather(*checks, return_exceptions=True)
        await self._watcher.aclose()
        await self._rpc.aclose()
        if self._owned_engine is not None:
            await self._owned_engine.dispose()

    @property
    def relayer_address(self) -> str:
        """The account that pays gas for settlements."""
        return self._relayer.address

    async def head_block(self) -> int:
        """The node's latest block number (a liveness probe)."""
        return int(await self._rpc.call("eth_blockNumber"), 16)

    def supported(self) -> SupportedResponse:
        """The kinds this facilitator verifies and settles, and its signer."""
        kinds = [SupportedKind(x402_version=2, scheme="exact", network=self.network)]
        try:
            v1_network = v1_network_from_chain_id(self.chain_id)
        except ValueError:
            pass  # a chain without a legacy v1 name is offered to v2 clients only
        else:
            kinds.append(SupportedKind(x402_version=1, scheme="exact", network=v1_network))
        return SupportedResponse(
            kinds=tuple(kinds),
            extensions=("payment-identifier",),
            signers={"eip155:*": (self._relayer.address,)},
        )

    async def verify(self, payload: PaymentPayload, requirements: PaymentRequirements) -> VerifyResponse:
        """Check `payload` against `requirements` without changing anything anywhere."""
        payer = payload.payload.authorization.from_address
        try:
            request = read_payment(payload, requirements, self.network)
            await self._verify(request)
        except PaymentInvalidError as exc:
            return VerifyResponse(
                is_valid=False, invalid_reason=exc.reason, invalid_message=exc.message, payer=payer
            )
        except ChainError as exc:
            logger.warning("verify could not reach the chain: %s", exc)
            return VerifyResponse(
                is_valid=False,
                invalid_reason=Reason.UNEXPECTED_VERIFY_ERROR,
                invalid_message=_CHAIN_DOWN,
                payer=payer,
            )
        return VerifyResponse(is_valid=True, payer=payer)

    async def settle(
        self,
        payload: PaymentPayload,
        requirements: PaymentRequirements,
        *,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
        presented_at: int | None = None,
    ) -> SettleResponse:
        """Settle `payload` on chain at most once; see the module docstring for the sequence.

        `idempotency_key` (or the payload's `payment-identifier` extension id) makes retries safe: the same
        key gets the first answer again, the transaction hash included. Without one, a second settle of an
        authorization is refused as `duplicate_settlement`, naming the original transaction.

        `presented_at` (unix seconds) is when the caller durably took this payment. An authorization that
        someone else's transaction already used to pay the payee counts as settled only if that transaction
        was mined at or after it, within a few seconds' skew (spec §15.6): one mined earlier may be a copy of
        a payment made elsewhere. Without it (the HTTP API cannot vouch for its callers) such a settle is
        refused as a used nonce, naming the transaction under `extensions.settledElsewhere`.

        Raises:
            IdempotencyConflictError: the key was first used for a different payment.
            InvalidIdempotencyKeyError: the key is not 1 to 255 printable ASCII characters.
        """
        budget_s = self._receipt_timeout_s if timeout_s is None else min(timeout_s, self._receipt_timeout_s)
        deadline = time.monotonic() + budget_s
        key_text = idempotency_key_of(idempotency_key, payload)
        try:
            request = read_payment(payload, requirements, self.network)
        except PaymentInvalidError as exc:
            return self._failure(exc.reason, exc.message, payload.payload.authorization.from_address)
        key = self._claim_key(request)
        try:
            verified = await self._verify_within(request, deadline)
        except PaymentInvalidError as exc:
            # Most refusals of a known authorization are its own earlier settlement (nonce now used, time
            # run out): the claim, not the chain, holds the answer. Looked up only here, off the happy path.
            existing = await self._claims.find(key, key_text)
            if existing is not None:
                return await self._answer_existing(existing, request, key_text, deadline)
            if exc.reason == Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED:
                front_run = await self._front_run(request, key_text, deadline, presented_at)
                if front_run is not None:
                    return front_run
            return self._failure(exc.reason, exc.message, request.authorization.from_)
        except ChainError as exc:
            logger.warning("settle could not reach the chain: %s", exc)
            # A settlement already under way is answered from its claim (pending, with its transaction),
            # never as a failure: its transaction may be mined while the chain cannot be read.
            existing = await self._claims.find(key, key_text)
            if existing is not None:
                return await self._answer_existing(existing, request, key_text, deadline)
            return self._failure(Reason.UNEXPECTED_SETTLE_ERROR, _CHAIN_DOWN, request.authorization.from_)
        claim, created = await self._claim(request, key_text)
        if not created:
            return await self._answer_existing(claim, request, key_text, deadline)
        return await self._broadcast(claim, verified, deadline)

    async def settlement_status(
        self, payload: PaymentPayload, requirements: PaymentRequirements, *, timeout_s: float = 0.0
    ) -> SettleResponse | None:
        """The settlement answer for this authorization, finishing a pending one; None if never claimed."""
        try:
            request = read_payment(payload, requirements, self.network)
        except PaymentInvalidError:
            return None
        claim = await self._claims.by_key(self._claim_key(request))
        if claim is None:
            return None
        if claim.state is ClaimState.BROADCAST:
            return await self._await_outcome(claim, time.monotonic() + timeout_s)
        if claim.response is not None:
            return SettleResponse.from_wire(claim.response)
        return self._pending(claim)

    # -- claims ---------------------------------------------------------------------------------------

    def _claim_key(self, request: PaymentRequest) -> ClaimKey:
        auth = request.authorization
        return ClaimKey(self.chain_id, request.terms.asset, auth.from_, "0x" + auth.nonce.hex())

    async def _claim(self, request: PaymentRequest, key_text: str | None) -> tuple[Claim, bool]:
        """Claim the authorization of `request` (`ClaimStore.claim`): (claim, True) if this call made it."""
        return await self._claims.claim(
            self._claim_key(request),
            idempotency_key=key_text,
            payload_hash=request.payload_hash,
            network=self.network,
            pay_to=request.terms.pay_to,
            amount=request.terms.amount,
            valid_before=request.authorization.valid_before,
        )

    async def _answer_existing(
        self, claim: Claim, request: PaymentRequest, key_text: str | None, deadline: float
    ) -> SettleResponse:
        """Answer a settle of an authorization (or idempotency key) that already has a claim."""
        same_key = key_text is not None and claim.idempotency_key == key_text
        if same_key and (claim.key != self._claim_key(request) or claim.payload_hash != request.payload_hash):
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
                max(deadline - time.monotonic(), 0.0),
            )
            if progressed is None:
                return self._pending(claim) if same_key else self._duplicate(claim)
            claim = progressed
            if claim.state is ClaimState.RELEASED and claim.response is not None:
                # The attempt we waited for failed before broadcasting: that is our answer too.
                return SettleResponse.from_wire(claim.response)
        if not same_key:
            return self._duplicate(claim)
        if claim.state is ClaimState.BROADCAST:
            return await self._await_outcome(claim, deadline)
        if claim.response is None:
            return self._pending(claim)
        return SettleResponse.from_wire(claim.response)

    async def _retry(
        self, claim: Claim, request: PaymentRequest, key_text: str | None, deadline: float
    ) -> SettleResponse | None:
        """Settle again an authorization whose claim was released (nothing sent, or a transaction that
        reverted without using it), or record someone else's settlement of it; None if another took it."""
        payer = request.authorization.from_
        try:
            verified = await self._verify_within(request, deadline)
        except PaymentInvalidError as exc:
            refused = self._failure(exc.reason, exc.message, payer)
            if exc.reason != Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED:
                return refused
            # Used since: our reverted transaction made it public, and someone may have paid the payee.
            found = await self._settled_elsewhere(request, deadline)
            if not isinstance(found, Receipt):
                return found or refused
            taken = await self._take_over(claim, request, key_text)
            if taken is None:
                return None
            logger.info("claim %s was settled by someone else's transaction %s", taken.id, found.tx_hash)
            return await self._record_success(taken, found.tx_hash, found.block_number, found.block_hash)
        except ChainError:
            return self._failure(Reason.UNEXPECTED_SETTLE_ERROR, _CHAIN_DOWN, payer)
        taken = await self._take_over(claim, request, key_text)
        if taken is None:
            return None
        logger.info("claim %s retaken for attempt %d", taken.id, taken.attempt)
        return await self._broadcast(taken, verified, deadline)

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

        Anyone holding a signed authorization may submit it (spec §15.6): when that happened after the
        caller took it but before we claimed it, the payer paid the payee exactly once and the settlement is
        theirs. It is claimed and recorded like ours, so the same authorization presented again is a
        duplicate. A transaction mined before `presented_at`, or with no `presented_at` to compare, may be a
        payment made through another channel whose public calldata was copied for a new purchase: refused,
        naming it. None when the nonce was used otherwise (cancelled, or another authorization with the same
        nonce): a refusal stands.
        """
        settled = await self._find_elsewhere(request, deadline)
        if settled is None:
            return None
        auth = request.authorization
        if presented_at is None:
            return self._used_elsewhere(request, settled)
        try:
            if not await self._mined_since(settled, presented_at, deadline):
                return self._used_elsewhere(request, settled)
        except ChainError as exc:
            logger.warning("settle could not date a front-running transaction: %s", exc)
            return self._failure(Reason.UNEXPECTED_SETTLE_ERROR, _CHAIN_DOWN, auth.from_)
        found = await self._confirmed_elsewhere(request, settled, deadline)
        if not isinstance(found, Receipt):
            return found
        claim, created = await self._claim(request, key_text)
        if not created:
            return await self._answer_existing(claim, request, key_text, deadline)
        logger.info("claim %s was settled by someone else's transaction %s", claim.id, found.tx_hash)
        return await self._record_success(claim, found.tx_hash, found.block_number, found.block_hash)

    async def _mined_since(self, settled: ThirdPartySettlement, presented_at: int, deadline: float) -> bool:
        """Whether `settled`'s block is stamped no earlier than `presented_at`, less the allowed skew.

        Raises:
            ChainError: the block could not be read within the budget.
        """
        block = await self._read_within(
            self._rpc.call("eth_getBlockByHash", settled.block_hash, False), deadline
        )
        # A block reorganised away since dates nothing: the refusal is the safe answer.
        return block is not None and int(block["timestamp"], 16) >= presented_at - _PRESENTED_SKEW_S

    def _used_elsewhere(self, request: PaymentRequest, settled: ThirdPartySettlement) -> SettleResponse:
        """The refusal of an authorization that a transaction not vouched to be ours to count already used."""
        refused = self._failure(
            Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED,
            "the authorization was already used on chain by a transaction not shown to be mined after the "
            "payment was presented here",
            request.authorization.from_,
        )
        found = {"transaction": settled.tx_hash, "blockNumber": settled.block_number}
        return refused.model_copy(update={"extensions": {"settledElsewhere": found}})

    async def _settled_elsewhere(
        self, request: PaymentRequest, deadline: float
    ) -> Receipt | SettleResponse | None:
        """The receipt, at the configured depth, of a transaction that used this authorization to pay the
        payee; a pending answer naming it while it is not that deep; None if there is none."""
        settled = await self._find_elsewhere(request, deadline)
        if settled is None:
            return None
        return await self._confirmed_elsewhere(request, settled, deadline)

    async def _find_elsewhere(self, request: PaymentRequest, deadline: float) -> ThirdPartySettlement | None:
        """The mined transaction that used this authorization to pay the payee, looked for within the
        caller's budget; None if there is none, or if the chain could not tell in time."""
        auth, terms = request.authorization, request.terms
        try:
            return await self._read_within(
                find_settlement(
                    self._rpc,
                    asset=terms.asset,
                    payer=auth.from_,
                    nonce="0x" + auth.nonce.hex(),
                    pay_to=terms.pay_to,
                    amount=terms.amount,
                ),
                deadline,
            )
        except ChainError as exc:
            logger.warning("settle could not look for a front-running transaction: %s", exc)
            return None

    async def _confirmed_elsewhere(
        self, request: PaymentRequest, settled: ThirdPartySettlement, deadline: float
    ) -> Receipt | SettleResponse:
        """`settled`'s receipt at the configured depth, or a pending answer naming it until then."""
        receipt = await self._watcher.wait(
            settled.tx_hash,
            confirmations=self._confirmations,
            timeout_s=max(deadline - time.monotonic(), 0.0),
        )
        if receipt is None:
            # Not deep enough yet: nothing is recorded, so asking again finds it once it is.
            return self._failure(
                Reason.SETTLEMENT_PENDING,
                "the payment was submitted by someone else and is not yet confirmed; ask again",
                request.authorization.from_,
                transaction=settled.tx_hash,
            )
        return receipt

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

    # -- chain ----------------------------------------------------------------------------------------

    async def _verify(self, request: PaymentRequest) -> VerifiedPayment:
        eoa = self._verifier.check_offline(request.authorization, request.terms)
        return await self._verifier.check_onchain(request.authorization, request.terms, eoa_signature=eoa)

    async def _verify_within(self, request: PaymentRequest, deadline: float) -> VerifiedPayment:
        """`_verify`, cut short at the deadline."""
        return await self._read_within(self._verify(request), deadline)

    async def _read_within(self, read: Awaitable[_T], deadline: float | None) -> _T:
        """`read`, cut short at the deadline: only for chain reads, so nothing is left half-done (a send
        or a claim write is never cut, since what it did must be recorded). No deadline: no caller is
        waiting (a reconcile pass), so only the RPC timeout bounds it.

        Raises:
            ChainUnavailableError: the node did not answer within the budget.
        """
        if deadline is None:
            return await read
        try:
            return await asyncio.wait_for(read, max(deadline - time.monotonic(), 0.0))
        except TimeoutError as exc:
            raise ChainUnavailableError("the chain did not answer within the settle's budget") from exc

    async def _broadcast(self, claim: Claim, verified: VerifiedPayment, deadline: float) -> SettleResponse:
        payer = verified.authorization.from_
        # The verifier refused estimates over the cap; the margin covers state that changes before mining.
        gas = min(self._gas_limit_cap, verified.gas_estimate * 5 // 4 + 10_000)
        try:
            sent = await self._relayer.send(claim.asset, verified.calldata, gas)
        except BroadcastUncertainError as exc:
            # Maybe out there: record it as broadcast; the receipt wait and `reconcile` settle the doubt.
            logger.warning("broadcast of claim %s uncertain: %s", claim.id, exc)
            sent = exc.sent
        except ChainError as exc:
            logger.warning("broadcast of claim %s failed: %s", claim.id, exc)
            response = self._failure(
                Reason.TRANSACTION_FAILED if isinstance(exc, RpcError) else Reason.UNEXPECTED_SETTLE_ERROR,
                "the settlement transaction could not be submitted; nothing was charged",
                payer,
            )
            return await self._record(claim, response, state=ClaimState.RELEASED)
        logger.debug("claim %s broadcast as %s (relayer nonce %d)", claim.id, sent.tx_hash, sent.nonce)
        return await self._await_outcome(claim, deadline, sent=sent)

    async def _await_outcome(
        self,
        claim: Claim,
        deadline: float,
        *,
        sent: SentTransaction | None = None,
        bounded_revive: bool = True,
    ) -> SettleResponse:
        """Wait for the claim's transaction at the configured depth and record what it did.

        A transaction just `sent` is recorded with the outcome in one write when its receipt comes
        quickly; a slower one is recorded as broadcast first, so a crash while waiting leaves its hash
        and signed bytes behind. (A crash before either write leaves a claim whose authorization the chain
        shows as used: `reconcile` finds the transaction by its `AuthorizationUsed` log.) A transaction
        broadcast earlier is first checked to still be in the pool or mined; that check keeps to the
        caller's budget too, unless `bounded_revive` is off (a reconcile pass, with no caller waiting).
        """
        receipt = None
        if sent is not None:
            tx_hash = sent.tx_hash
            quick_s = min(_QUICK_RECEIPT_S, max(deadline - time.monotonic(), 0.0))
            receipt = await self._watcher.wait(tx_hash, confirmations=self._confirmations, timeout_s=quick_s)
            if receipt is None:
                await self._claims.mark_broadcast(
                    claim.id, relayer=sent.sender, relayer_nonce=sent.nonce, tx_hash=tx_hash, raw_tx=sent.raw
                )
                sent = None
        else:
            # Broadcast earlier: first make sure the transaction has not silently left the pool, so one
            # dropped is sent again in time to be mined while this caller waits.
            revived = await self._pool_check(claim, claim.tx_hash or "", deadline, bounded=bounded_revive)
            if isinstance(revived, ThirdPartySettlement):
                return await self._record_success(
                    claim, revived.tx_hash, revived.block_number, revived.block_hash
                )
            tx_hash = revived
        if receipt is None:
            receipt = await self._watcher.wait(
                tx_hash, confirmations=self._confirmations, timeout_s=max(deadline - time.monotonic(), 0.0)
            )
        if receipt is None:
            return await self._record(claim, self._pending(claim, tx_hash))
        sent_fields: dict[str, Any] = (
            {"relayer": sent.sender, "relayer_nonce": sent.nonce, "raw_tx": sent.raw}
            if sent is not None
            else {}
        )
        if receipt.status != 1:
            within = deadline if bounded_revive else None
            try:
                settled = await self._third_party_settlement(claim, within)
            except ChainError as exc:
                return await self._undecided(claim, tx_hash, sent_fields, exc)
            if settled is not None:
                return settled
            released = await self._release_reverted(claim, receipt, tx_hash, sent_fields, within)
            if released is not None:
                return released
            reason, message = Reason.TRANSACTION_FAILED, "the settlement transaction reverted"
        elif not any(
            log.token == claim.asset
            and log.from_ == claim.payer
            and log.to == claim.pay_to
            and log.value == claim.amount
            for log in transfer_logs(receipt.raw)
        ):
            reason = Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH
            message = "the transaction did not transfer the authorized amount"
        else:
            logger.info("claim %s settled by %s in block %d", claim.id, tx_hash, receipt.block_number)
            return await self._record_success(
                claim, tx_hash, receipt.block_number, receipt.block_hash, **sent_fields
            )
        logger.warning("claim %s failed on chain in %s: %s", claim.id, tx_hash, reason)
        failure = self._failure(reason, message, claim.payer, transaction=tx_hash)
        return await self._record(
            claim,
            failure,
            state=ClaimState.FAILED,
            error_reason=reason.value,
            tx_hash=tx_hash,
            block_number=receipt.block_number,
            block_hash=receipt.block_hash,
            **sent_fields,
        )

    async def _pool_check(
        self, claim: Claim, tx_hash: str, deadline: float, *, bounded: bool
    ) -> str | ThirdPartySettlement:
        """`Recovery.safely`, within the caller's budget when `bounded`: past the deadline, `tx_hash`.

        Each of its RPC calls may take the whole RPC timeout on a stalled node, so it runs as a task of
        its own (one per claim at a time) and only the wait is cut short: the check carries on, and a
        transaction it re-sends is still recorded with the claim, never abandoned half-sent.
        """
        task = self._pool_checks.get(claim.id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._recovery.safely(claim, tx_hash))
            self._pool_checks[claim.id] = task
            task.add_done_callback(lambda _: self._pool_checks.pop(claim.id, None))
        if not bounded:
            return await asyncio.shield(task)
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            logger.info("claim %s: the pool check of %s outlasted the caller's budget", claim.id, tx_hash)
            return tx_hash

    async def _release_reverted(
        self,
        claim: Claim,
        receipt: Receipt,
        tx_hash: str,
        sent_fields: dict[str, Any],
        deadline: float | None,
    ) -> SettleResponse | None:
        """Release a claim whose transaction reverted without using the authorization (out of gas, say).

        The payer was not charged and the authorization can still pay, so the claim must not end `failed`
        (every retry would be refused as a duplicate). Releasing cannot settle twice: the reverted
        transaction is final, and the token uses an authorization at most once, so whichever later
        transaction carries it either pays (once) or reverts and is then matched to the one that paid.
        None when the authorization is used (cancelled, or paid elsewhere) or expired, or when this was the
        claim's `MAX_SETTLE_ATTEMPTS`th transaction: a failure for good. The chain reads keep to the
        `deadline`; past it the answer is pending, decided on a later call.
        """
        if claim.attempt >= MAX_SETTLE_ATTEMPTS:
            logger.warning("claim %s: attempt %d reverted too; not released again", claim.id, claim.attempt)
            return None
        state_call = {
            "to": claim.asset,
            "data": encode_authorization_state(claim.payer, bytes.fromhex(claim.nonce[2:])),
        }
        try:
            used, head = await self._read_within(
                self._rpc.batch(
                    [
                        RpcCall("eth_call", [state_call, "latest"]),
                        RpcCall("eth_getBlockByNumber", ["latest", False]),
                    ]
                ),
                deadline,
            )
            if isinstance(used, RpcError):
                raise used
            if isinstance(head, RpcError):
                raise head
        except ChainError as exc:
            return await self._undecided(claim, tx_hash, sent_fields, exc)
        # Later blocks are no older than the latest: an authorization expired there can never be used.
        if decode_bool(used) or int(head["timestamp"], 16) >= claim.valid_before:
            return None
        logger.warning("claim %s: %s reverted and left the authorization unused; released", claim.id, tx_hash)
        failure = self._failure(
            Reason.TRANSACTION_FAILED,
            "the settlement transaction reverted without moving the funds; the authorization is unused "
            "and may be settled again",
            claim.payer,
            transaction=tx_hash,
        )
        return await self._record(
            claim,
            failure,
            state=ClaimState.RELEASED,
            error_reason=Reason.TRANSACTION_FAILED.value,
            tx_hash=tx_hash,
            block_number=receipt.block_number,
            block_hash=receipt.block_hash,
            **sent_fields,
        )

    async def _record_success(
        self, claim: Claim, tx_hash: str, block_number: int, block_hash: str, **changes: Any
    ) -> SettleResponse:
        success = SettleResponse(
            success=True,
            payer=claim.payer,
            transaction=tx_hash,
            network=self.network,
            amount=claim.amount,
            extensions={"settlement": {"blockNumber": block_number, "confirmations": self._confirmations}},
        )
        changes.update(
            state=ClaimState.SUCCEEDED, tx_hash=tx_hash, block_number=block_number, block_hash=block_hash
        )
        return await self._record(claim, success, **changes)

    async def _undecided(
        self, claim: Claim, tx_hash: str, sent_fields: dict[str, Any], exc: ChainError
    ) -> SettleResponse:
        """Pending: what `tx_hash` reverting means could not be read in time; a later call decides it."""
        logger.warning("claim %s: cannot tell what the revert of %s means: %s", claim.id, tx_hash, exc)
        if sent_fields:
            await self._claims.mark_broadcast(claim.id, tx_hash=tx_hash, **sent_fields)
        return self._pending(claim, tx_hash)

    async def _third_party_settlement(
        self, claim: Claim, deadline: float | None = None
    ) -> SettleResponse | None:
        """Success, if the authorization was used by another transaction that paid the payee (front-running).

        Anyone holding a signed authorization may submit it; when someone beat our transaction to it, ours
        reverts, but the payer did pay: the settlement is theirs. The claim proves the payment was presented
        here before that, so the transaction's age is not checked. The search keeps to the `deadline`.

        Raises:
            ChainError: the chain could not tell within the budget.
        """
        settled = await self._read_within(self._recovery.settlement_of(claim), deadline)
        if settled is None:
            return None
        logger.info("claim %s was settled by another transaction, %s", claim.id, settled.tx_hash)
        return await self._record_success(claim, settled.tx_hash, settled.block_number, settled.block_hash)

    async def reconcile(self, *, reorg_window_blocks: int = 64) -> int:
        """Finish what crashes, dropped transactions and reorgs left behind; return how many claims moved.

        Broadcast claims are awaited briefly (and revived if their transaction left the pool); claims whose
        owner vanished before broadcasting are released, or recorded as settled if their authorization was
        used meanwhile; recent successes whose transaction a reorg removed are broadcast again while their
        authorization is still unused.
        """
        moved = 0
        for claim in await self._claims.unfinished():
            try:
                if claim.state is ClaimState.BROADCAST:
                    answer = await self._await_outcome(claim, time.monotonic() + 0.2, bounded_revive=False)
                    moved += answer.error_reason != Reason.SETTLEMENT_PENDING
                elif claim.lease_expired:
                    if not await self._recovery.authorization_used(claim, "latest"):
                        await self._claims.release(claim.id)
                        moved += 1
                    elif await self._third_party_settlement(claim) is not None:
                        moved += 1
            except ChainError as exc:
                logger.warning("reconcile: claim %s: %s", claim.id, exc)
        head = await self.head_block()
        for claim in await self._claims.succeeded_since(head - reorg_window_blocks):
            try:
                receipt = await self._rpc.call("eth_getTransactionReceipt", claim.tx_hash)
                if receipt is None and claim.tx_hash:
                    logger.warning("claim %s: %s is no longer on chain (reorg)", claim.id, claim.tx_hash)
                    await self._recovery.revive(claim, claim.tx_hash)
                    moved += 1
            except ChainError as exc:
                logger.warning("reconcile: claim %s: %s", claim.id, exc)
        return moved

    async def _record(self, claim: Claim, response: SettleResponse, **changes: Any) -> SettleResponse:
        """Store `response` with the claim and answer with what the claim holds (the first answer wins)."""
        stored = await self._claims.record_response(claim.id, response.to_json_dict(), **changes)
        return SettleResponse.from_wire(stored.response) if stored.response is not None else response

    # -- answers --------------------------------------------------------------------------------------

    def _failure(self, reason: str, message: str, payer: str, *, transaction: str = "") -> SettleResponse:
        return SettleResponse(
            success=False,
            error_reason=reason,
            error_message=message,
            payer=payer,
            transaction=transaction,
            network=self.network,
        )

    def _pending(self, claim: Claim, tx_hash: str | None = None) -> SettleResponse:
        return self._failure(
            Reason.SETTLEMENT_PENDING,
            "the settlement is broadcast but not yet confirmed; ask again with the same idempotency key",
            claim.payer,
            transaction=tx_hash or claim.tx_hash or "",
        )

    def _duplicate(self, claim: Claim) -> SettleResponse:
        response = self._failure(
            Reason.DUPLICATE_SETTLEMENT,
            "this authorization was already presented for settlement",
            claim.payer,
        )
        original = {"state": claim.state.value, "transaction": claim.tx_hash or ""}
        return response.model_copy(update={"extensions": {"originalSettlement": original}})
