"""Finishing paid turns whose executor is gone (a crash, a restart, a replica that died).

A live executor keeps its offer fresh while it works and waits (`OfferStore.touch`); an offer that is
still taking payment but has not been touched for a while has lost its owner. What is left to do follows
from how far it got:

- `settling`: the work is done and its artifacts are held in the offer. The settlement is looked up (or,
  if it never reached the facilitator or was claimed but never broadcast, made now, with the task's
  idempotency key, so it still happens at most once); once it succeeds the payment is booked and the
  task completed with the held artifacts, and a definite failure fails the task. A settlement still
  pending is left for a later pass, as is an `upto` one whose key another facilitator process holds now
  (`_key_elsewhere`). A facilitator that cannot say (unreachable, or answering garbage, perhaps for good)
  is waited for only while the authorization can still be used: once the chain shows it unused past its
  validBefore (`authorizationState` on the token, through the merchant's own node), nothing can ever be
  charged and the task fails, saying so. One the chain shows used is left to the reconciler's chain
  scan, which books what it finds (this pass knows no transaction to prove).
- `working`: nothing was settled, so nothing was charged; the task fails, saying so.

An offer already decided (paid, failed, rejected) whose task was never told — the process stopped between
the offer's write and the task's — gets its task told from the offer: completed with the held artifacts
and the receipts, failed with the error, or canceled. A paid offer the ledger lacks is booked.

Tasks are updated in the task store directly: after a restart no live request or stream holds them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import Artifact, Task, TaskState, TaskStatusUpdateEvent
from google.protobuf.json_format import ParseDict

from a2a_x402.extension import (
    Dialect,
    PaymentCompletedData,
    PaymentData,
    PaymentErrorCode,
    PaymentFailedData,
    PaymentRejectedData,
    error_code_for_reason,
)
from a2a_x402.facilitator import (
    ChainError,
    FacilitatorAnswerError,
    FacilitatorClient,
    IdempotencyConflictError,
    RpcClient,
)
from a2a_x402.facilitator.wire import PaymentRequirements, Reason, SettleResponse, signer_of

from ..ap2 import Ap2EvidenceStore
from ..ledger import Ledger
from ..tenants import TenantRegistry
from ._booking import book_settlement, record_paid
from ._conflict import answer_unsettled
from ._key_elsewhere import key_held_elsewhere
from ._keys import SettlementKeys
from ._metered import settled_requirements, settled_text, stored_usage
from ._offer_table import Offer, OfferState
from ._offers import TOLD_BY, OfferStore
from ._outcomes import (
    PaymentOutcome,
    add_recovered_ap2_receipts,
    failure_text,
    keep_ap2_receipts,
    log_unpaid,
)
from ._refusals import one_line
from ._signed import SignedPayment, nonce_used, payment_from_wire, valid_before
from ._wire import agent_status

__all__ = ["PaymentRecovery"]

logger = logging.getLogger(__name__)

EXPIRED_UNUSED = (
    "The facilitator could not say what became of the payment, and its authorization expired unused on "
    "chain; nothing was charged."
)

_TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


class PaymentRecovery:
    """Finishes the paid turns left behind; safe to run from every replica, repeatedly."""

    def __init__(
        self,
        *,
        offers: OfferStore,
        facilitator: FacilitatorClient,
        ledger: Ledger,
        chain: RpcClient,
        tasks: TaskStore,
        stale_after_s: float = 60.0,
        settle_timeout_s: float = 5.0,
        tenants: TenantRegistry | None = None,
        evidence: Ap2EvidenceStore | None = None,
    ):
        self._offers = offers
        self._tenants = tenants  # their AP2 checkout keys sign the receipts of the rounds it ends
        self._evidence = evidence  # which keeps those receipts with the round's evidence (§20.6)
        self._keys = SettlementKeys(offers.engine)
        self._facilitator = facilitator
        self._ledger = ledger
        self._chain = chain
        self._tasks = tasks
        self._stale_after = timedelta(seconds=stale_after_s)
        self._settle_timeout_s = settle_timeout_s
        self._unproven: list[tuple[str, str, str]] = []

    async def finish_abandoned(self, *, on_failure: Callable[[], None] | None = None) -> int:
        """Finish every abandoned paid turn; return how many were finished.

        Each turn is on its own: one that cannot be finished now (the facilitator unreachable or answering
        nonsense, a fault of its own) is logged in one line, reported to `on_failure`, and tried again by the
        next pass; the others are finished regardless.
        """
        cutoff = datetime.now(UTC) - self._stale_after
        finished = 0
        for offer in await self._offers.unfinished():
            if offer.updated_at > cutoff:
                continue
            try:
                finished += await self._finish(offer)
            except ChainError as exc:
                logger.warning("recovery of task %s postponed: %s", offer.task_id, exc)
                _count(on_failure)
            except Exception as exc:  # noqa: BLE001 - one turn must never stop the others' recovery
                logger.warning("recovery of task %s postponed: %s", offer.task_id, exception_line(exc))
                _count(on_failure)
        return finished

    async def tell_untold(self, *, on_failure: Callable[[], None] | None = None) -> int:
        """Tell every task whose payment was decided a while ago but never reached it; return how many.

        A task that ended otherwise (the SDK fails a task whose events it could not store, say) is put in
        the state its payment decided: a paid task completes with its artifacts, whatever it said before.
        """
        told = 0
        for offer in await self._offers.untold(datetime.now(UTC) - self._stale_after):
            try:
                told += await self._tell_if_untold(offer)
            except Exception:  # noqa: BLE001 - one task that cannot be told must not stop the pass
                logger.exception("could not tell task %s its payment is %s", offer.task_id, offer.state.value)
                _count(on_failure)
        return told

    async def _tell_if_untold(self, offer: Offer) -> bool:
        told_by = TOLD_BY[offer.state]
        task = await self._tasks.get(offer.task_id, ServerCallContext(tenant=offer.tenant))
        if task is None:
            # Not marked told: a task this process cannot see is not a task that knows its outcome.
            logger.warning("task %s (payment %s) is not in the task store", offer.task_id, offer.state.value)
            return False
        telling = task.status.state != told_by
        if telling:
            if task.status.state in _TERMINAL:
                logger.warning(
                    "task %s ended %s but its payment is %s: correcting it",
                    offer.task_id,
                    TaskState.Name(task.status.state),
                    offer.state.value,
                )
            await self._tell(offer)
            logger.info("recovered task %s: told it the payment is %s", offer.task_id, offer.state.value)
        await self._offers.told(offer.task_id, told_by)
        return telling

    async def _tell(self, offer: Offer) -> None:
        receipts = [SettleResponse.from_wire(r) for r in offer.receipts if not _pending(r)]
        if offer.state is OfferState.PAID:
            await self._complete(offer, receipts, correct=True)
        elif offer.state is OfferState.REJECTED:
            await self._update_task(
                offer,
                TaskState.TASK_STATE_CANCELED,
                "Payment declined; the task is canceled.",
                PaymentRejectedData(),
                [],
                correct=True,
            )
        else:
            code = _error_code(offer.error)
            text = f"The payment was not taken ({code.value})."
            data = PaymentFailedData(error=code, receipts=tuple(receipts))
            await self._update_task(offer, TaskState.TASK_STATE_FAILED, text, data, [], correct=True)

    async def _complete(self, offer: Offer, receipts: list[SettleResponse], *, correct: bool = False) -> None:
        """Complete the task with its held artifacts and its receipts, the last one a success (and a metered
        task's usage)."""
        artifacts = [ParseDict(item, Artifact()) for item in offer.held_artifacts or []]
        settled = next((r.transaction for r in reversed(receipts) if r.success), None)
        await self._update_task(
            offer,
            TaskState.TASK_STATE_COMPLETED,
            settled_text(settled) if settled is not None else "Payment settled.",
            PaymentCompletedData(receipts=tuple(receipts), usage=stored_usage(offer)),
            artifacts,
            correct=correct,
        )

    async def book_unbooked(self, *, on_failure: Callable[[], None] | None = None) -> int:
        """Book the settlements of paid tasks that the ledger lacks (their booking failed); return how many.

        Only offers recorded paid without a booking are read; one the ledger already holds (booked by
        another replica, or before this column existed) is just marked booked.
        """
        booked = 0
        self._unproven = []
        for offer in await self._offers.unbooked():
            try:
                booked += await self._book_if_unbooked(offer)
            except Exception as exc:  # noqa: BLE001 - one booking must never stop the others'
                logger.warning("booking task %s postponed: %s", offer.task_id, exception_line(exc))
                _count(on_failure)
        return booked

    @property
    def unproven(self) -> list[tuple[str, str, str]]:
        """The last `book_unbooked` pass's settlements the chain does not show paid their offer:
        (tenant, payTo, what the chain shows instead), for the reconciler to report."""
        return list(self._unproven)

    async def _book_if_unbooked(self, offer: Offer) -> bool:
        """Book `offer`'s settlement if the ledger lacks it; True if this call booked it."""
        if offer.payload is None or offer.accepted is None or not offer.receipts:
            return False
        payload = payment_from_wire(offer.payload)
        requirements = settled_requirements(
            PaymentRequirements.from_wire(offer.accepted), stored_usage(offer)
        )
        signer = signer_of(payload)
        already = await self._ledger.has_authorization(
            requirements.chain_id, requirements.asset, signer.payer, signer.nonce
        )
        response = SettleResponse.from_wire(offer.receipts[-1])
        # Booking is idempotent: for an authorization already in the ledger it only marks the offer.
        mark = partial(self._offers.mark_booked, task_id=offer.task_id)
        unproven: list[str] = []
        try:
            if response.success and await book_settlement(
                self._ledger,
                self._chain,
                offer,
                payload,
                requirements,
                response,
                along=mark,
                unproven=unproven,
            ):
                if not already:
                    logger.info("booked the settlement of task %s late", offer.task_id)
                    return True
            return False
        finally:
            self._unproven += [(offer.tenant, requirements.pay_to, text) for text in unproven]

    async def _finish(self, offer: Offer) -> bool:
        if offer.state is not OfferState.SETTLING or offer.payload is None or offer.accepted is None:
            await self._fail(
                offer, PaymentErrorCode.SETTLEMENT_FAILED, "The work was interrupted; nothing was charged."
            )
            return True
        payload = payment_from_wire(offer.payload)
        # A metered payment is settled for the usage its paid turn stored, as that turn would have.
        requirements = settled_requirements(
            PaymentRequirements.from_wire(offer.accepted), stored_usage(offer)
        )
        try:
            response = await self._ask_facilitator(offer, payload, requirements)
        except ChainError as exc:
            # The facilitator cannot say (unreachable, or answering garbage, perhaps for good): the chain can,
            # once the authorization has expired.
            if not await self._expired_unused(offer, payload, requirements.asset, exc):
                raise
            await self._fail(
                offer, PaymentErrorCode.SETTLEMENT_FAILED, EXPIRED_UNUSED, said=one_line(str(exc))
            )
            return True
        if response.error_reason == Reason.SETTLEMENT_PENDING:
            return False
        if key_held_elsewhere(response, payload):
            logger.warning(
                "recovery of task %s postponed: %s", offer.task_id, one_line(response.error_message or "")
            )
            return False
        # The pending receipt recorded while the settlement was unconfirmed is resolved by this answer.
        receipts = [*(r for r in offer.receipts if not _pending(r)), response.to_json_dict()]
        if not response.success:
            code = error_code_for_reason(response.error_reason, response.error_message)
            reason = response.error_reason or Reason.UNEXPECTED_SETTLE_ERROR
            await self._fail(
                offer,
                code,
                failure_text("Settlement", code, reason, response.error_message, ended=True),
                said=response.error_message,
            )
            return True
        await record_paid(
            self._ledger, self._chain, self._offers, offer, payload, requirements, response, receipts
        )
        await self._complete(offer, [SettleResponse.from_wire(r) for r in receipts])
        await self._offers.told(offer.task_id, TaskState.TASK_STATE_COMPLETED)
        logger.info("recovered task %s: settled in %s and delivered", offer.task_id, response.transaction)
        return True

    async def _ask_facilitator(
        self, offer: Offer, payload: SignedPayment, requirements: PaymentRequirements
    ) -> SettleResponse:
        """What the facilitator says of `offer`'s settlement, settling it now if it never was.

        Raises:
            ChainError: the facilitator could not be asked, or answered no x402 answer.
        """
        response: SettleResponse | None = await self._facilitator.settlement_status(
            payload, requirements, timeout_s=1.0
        )
        if response is None or _unsent(response):
            # Never claimed, or claimed by an owner that died before broadcasting (the claim is released,
            # or will be once its lease ends): settle with the task's key. The claim still lets at most
            # one transaction through, and a claim whose owner is alive is waited for, not taken.
            # The taken time lets a transaction someone else mined since (a front-runner) settle the task
            # where foreign settlements count (X402_COUNT_FOREIGN_SETTLEMENTS); an offer taken before it was
            # stored has none, and such a transfer is refused and reported, as it is by default.
            taken = offer.taken_at
            try:
                response = await self._facilitator.settle(
                    payload,
                    requirements,
                    idempotency_key=await self._keys.key(offer.task_id, offer.round),
                    timeout_s=self._settle_timeout_s,
                    presented_at=None if taken is None else int(taken.timestamp()),
                )
            except (IdempotencyConflictError, FacilitatorAnswerError) as exc:
                response = await answer_unsettled(
                    self._facilitator, payload, requirements, offer.task_id, exc
                )
        return response

    async def _expired_unused(
        self, offer: Offer, payload: SignedPayment, asset: str, error: ChainError
    ) -> bool:
        """Whether the chain shows `offer`'s authorization unused past its validBefore: then no transaction
        can ever use it, so nothing was, or will be, charged. A used one is for the reconciler's chain scan
        to book (this knows no transaction of it); one still valid, or a chain that cannot be read, waits
        for a later pass."""
        signer = signer_of(payload)
        try:
            latest = await self._chain.call("eth_getBlockByNumber", "latest", False)
            now = int(latest["timestamp"], 16)
            if valid_before(payload) > now:
                return False
            used = await nonce_used(self._chain, asset, signer.payer, signer.nonce)
        except (ChainError, KeyError, TypeError, ValueError) as exc:
            logger.warning("recovery of task %s: the chain could not be read either: %s", offer.task_id, exc)
            return False
        if used:
            logger.warning(
                "recovery of task %s: the facilitator cannot say (%s) and the chain shows its authorization "
                "used; the reconciler's chain scan books it",
                offer.task_id,
                one_line(str(error)),
            )
            return False
        return True

    async def _fail(
        self, offer: Offer, code: PaymentErrorCode, text: str, *, said: str | None = None
    ) -> None:
        receipts = tuple(SettleResponse.from_wire(r) for r in offer.receipts if not _pending(r))
        if not await self._offers.advance(offer.task_id, OfferState.FAILED, error=code.value):
            return  # its owner decided it meanwhile, and tells the task
        await self._update_task(
            offer, TaskState.TASK_STATE_FAILED, text, PaymentFailedData(error=code, receipts=receipts), []
        )
        await self._offers.told(offer.task_id, TaskState.TASK_STATE_FAILED)
        logged = one_line(said) if said else text
        log_unpaid(
            offer.task_id, offer.tenant, PaymentOutcome.FAILED, code.value, None, f"recovered: {logged}"
        )

    async def _update_task(
        self,
        offer: Offer,
        state: TaskState,
        text: str,
        data: PaymentData,
        artifacts: list[Artifact],
        *,
        correct: bool = False,
    ) -> None:
        """Put the task in `state`; a task already ended is left alone unless `correct` (it ended wrongly)."""
        context = ServerCallContext(tenant=offer.tenant)
        task = await self._tasks.get(offer.task_id, context)
        if task is None or (task.status.state in _TERMINAL and not correct):
            return
        update: TaskStatusUpdateEvent = agent_status(
            offer.task_id, offer.context_id, state, text, data, Dialect(offer.dialect)
        )
        if self._tenants is not None and (usage := self._offers.usage) is not None:
            use = await usage.round_use(offer.task_id, offer.round)
            receipts = add_recovered_ap2_receipts(update, task.history, offer, self._tenants, use, data)
            await keep_ap2_receipts(self._evidence, offer.task_id, offer.round, receipts)
        _apply(task, update, artifacts)
        await self._tasks.save(task, context)


def _apply(task: Task, update: TaskStatusUpdateEvent, artifacts: list[Artifact]) -> None:
    """What the SDK's task manager does with a status update: the old status message joins the history.

    An artifact replaces one of the same id (some of the held artifacts may have reached the task
    already), as the SDK does with a whole artifact update.
    """
    if task.status.HasField("message"):
        task.history.append(task.status.message)
    task.status.CopyFrom(update.status)
    replaced = {artifact.artifact_id for artifact in artifacts}
    kept = [artifact for artifact in task.artifacts if artifact.artifact_id not in replaced]
    del task.artifacts[:]
    task.artifacts.extend([*kept, *artifacts])


def _error_code(error: str | None) -> PaymentErrorCode:
    """The stored error of a failed offer as a code (none, or a value this version does not know, reads as a
    failed settlement: the task failed, nothing more is known)."""
    if error is None:
        return PaymentErrorCode.SETTLEMENT_FAILED
    try:
        return PaymentErrorCode(error)
    except ValueError:
        return PaymentErrorCode.SETTLEMENT_FAILED


def _pending(receipt: dict[str, object]) -> bool:
    return receipt.get("errorReason") == Reason.SETTLEMENT_PENDING


def _unsent(response: SettleResponse) -> bool:
    """A pending answer naming no transaction: the authorization is claimed but nothing was broadcast."""
    return response.error_reason == Reason.SETTLEMENT_PENDING and not response.transaction


def _count(on_failure: Callable[[], None] | None) -> None:
    if on_failure is not None:
        on_failure()


def exception_line(exc: BaseException) -> str:
    """An exception as one bounded log line: its type and its message's first line (SQLAlchemy appends
    the statement and its parameters on the next ones)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}".rstrip(": ")
