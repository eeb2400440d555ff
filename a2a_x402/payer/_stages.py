"""What a payment run reports: its stages as they happen, and the result when the task completes.

``TaskView`` keeps the payer's picture of the merchant's task up to date from whatever the merchant sends
(a whole task from SendMessage or GetTask, or a stream's status and artifact updates) and describes each
change as a ``PaymentStage``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias

from a2a.helpers import get_message_text
from a2a.types import Artifact, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState
from google.protobuf.json_format import MessageToDict

from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_ID,
    Ap2Mandates,
    Ap2Receipts,
    Dialect,
    ExtensionMetadataError,
    PaymentCompletedData,
    PaymentData,
    PaymentFailedData,
    PaymentUsage,
    PaymentVerifiedData,
    X402Receipt,
    decode,
)
from a2a_x402.facilitator.wire import (
    ExactPermit2PaymentPayload,
    PaymentPayload,
    PaymentRequirements,
    SettleResponse,
    UptoPaymentPayload,
)

from ._errors import MerchantError, PaymentFailedError

__all__ = [
    "PaidResult",
    "PaymentStage",
    "SignedPayment",
    "StageKind",
    "TaskView",
    "failure_of",
    "transaction_of",
]

SignedPayment: TypeAlias = PaymentPayload | ExactPermit2PaymentPayload | UptoPaymentPayload
"""A payment the payer signed: an EIP-3009 authorization, or a Permit2 witness transfer (``exact`` or
``upto``)."""


class StageKind(StrEnum):
    """What a ``PaymentStage`` reports."""

    TASK = "task"
    """The whole task arrived: a SendMessage or GetTask answer, or the first event of a stream."""
    STATUS = "status"
    """A stream's status update: the task's state and status message changed."""
    ARTIFACT = "artifact"
    """A stream's artifact update."""
    PAYMENT_SIGNED = "payment-signed"
    """The payer signed an authorization for ``requirements`` and is about to submit it."""
    RESUBMITTED = "resubmitted"
    """The submission's answer was lost (``detail`` says how); the same signed payment is presented again."""
    COMPLETED = "completed"
    """The task completed; ``result`` holds its artifacts and receipts. Always the last stage."""


@dataclass(frozen=True, slots=True)
class PaidResult:
    """A completed task and what was paid for it.

    Attributes:
        task: the task as the merchant last reported it.
        receipts: the merchant's settlement receipts, newest (the successful one) last; empty when the task
            completed without asking for payment.
        paid: the terms of the payment that was taken, or ``None`` when nothing was paid; for ``upto``
            terms ``paid.amount`` is the maximum authorized, and ``settled`` what was taken of it.
        payer: the paying address.
        usage: for an ``upto`` task, what the merchant says the task used and settled, if it said.
        ap2_mandates: the closed AP2 mandates the payment was presented with (§20.4), if it was; AP2
            asks the agent to keep them with the receipts. Credentials: never shown.
        ap2_receipts: the merchant's success receipts for them (§20.6), verified with the tenant's keys,
            when it sent them.
    """

    task: Task
    receipts: tuple[X402Receipt, ...]
    paid: PaymentRequirements | None
    payer: str
    usage: PaymentUsage | None = None
    ap2_mandates: Ap2Mandates | None = field(default=None, repr=False)
    ap2_receipts: Ap2Receipts | None = field(default=None, repr=False)

    @property
    def task_id(self) -> str:
        """The merchant's task id."""
        return self.task.id

    @property
    def state(self) -> TaskState:
        """The task's final state (completed)."""
        return self.task.status.state

    @property
    def artifacts(self) -> tuple[Artifact, ...]:
        """What the task produced: its artifacts but the AP2 checkout, which is an offer, not work."""
        return tuple(a for a in self.task.artifacts if a.artifact_id != AP2_CHECKOUT_ARTIFACT_ID)

    @property
    def settled(self) -> int | None:
        """The atomic units taken: what the successful receipt says it settled, else the terms' amount;
        ``None`` when nothing was paid. An ``upto`` task that used nothing settles 0 (and no transaction)."""
        if self.paid is None:
            return None
        amounts = [r.amount for r in self.receipts if isinstance(r, SettleResponse) and r.success]
        return amounts[-1] if amounts and amounts[-1] is not None else self.paid.amount

    @property
    def transaction(self) -> str | None:
        """The hash of the settlement transaction, or ``None`` when nothing was settled."""
        settled = [r.transaction for r in self.receipts if r.success and r.transaction]
        return settled[-1] if settled else None


@dataclass(frozen=True, slots=True)
class PaymentStage:
    """One step of a payment run.

    Attributes:
        kind: what happened.
        task_id: the merchant's task.
        state: the task's state after this stage.
        payment: the x402 extension data of the task's status message after this stage, if any.
        message: the text of the task's status message after this stage, if any.
        artifact: the artifact of an ``ARTIFACT`` stage.
        payload: the signed payment of a ``PAYMENT_SIGNED`` stage.
        transaction: a settlement transaction this stage names (pending, settled or failed).
        detail: why a ``RESUBMITTED`` stage happened.
        result: the outcome, on the ``COMPLETED`` stage only.
    """

    kind: StageKind
    task_id: str
    state: TaskState
    payment: PaymentData | None = None
    message: str | None = None
    artifact: Artifact | None = None
    payload: SignedPayment | None = None
    transaction: str | None = None
    detail: str | None = None
    result: PaidResult | None = None

    @property
    def requirements(self) -> PaymentRequirements | None:
        """The terms a ``PAYMENT_SIGNED`` stage signed."""
        return self.payload.accepted if self.payload is not None else None


class TaskView:
    """The payer's picture of one task, updated from the merchant's answers and stream events."""

    def __init__(self) -> None:
        self._task: Task | None = None

    @property
    def task(self) -> Task:
        """The task as last reported."""
        if self._task is None:
            raise RuntimeError("no task yet")
        return self._task

    @property
    def payment(self) -> PaymentData | None:
        """The x402 extension data of the task's status message.

        Raises:
            MerchantError: the merchant wrote malformed extension data.
        """
        status = self.task.status
        if not status.HasField("message") or not status.message.HasField("metadata"):
            return None
        try:
            return decode(MessageToDict(status.message.metadata), Dialect.V03)
        except ExtensionMetadataError as exc:
            raise MerchantError(
                f"the merchant's x402 metadata is malformed: {exc}", task_id=self.task.id
            ) from exc

    def apply(self, event: StreamResponse) -> PaymentStage:
        """Fold one answer or stream event into the task and describe the change.

        Raises:
            MerchantError: the merchant answered with a message instead of a task, or about another task.
        """
        match event.WhichOneof("payload"):
            case "task":
                return self.replace(event.task)
            case "status_update":
                update = event.status_update
                task = self._task_for(update.task_id, update.context_id)
                task.status.CopyFrom(update.status)
                return self._stage(StageKind.STATUS)
            case "artifact_update":
                task = self._task_for(event.artifact_update.task_id, event.artifact_update.context_id)
                _merge_artifact(task, event.artifact_update)
                return self._stage(StageKind.ARTIFACT, artifact=event.artifact_update.artifact)
            case "message":
                text = get_message_text(event.message)
                raise MerchantError(f"the merchant answered with a message instead of a task: {text!r}")
            case _:
                raise MerchantError("the merchant sent an empty event")

    def replace(self, task: Task) -> PaymentStage:
        """Take ``task`` as the current picture."""
        self._check_id(task.id)
        copy = Task()
        copy.CopyFrom(task)
        self._task = copy
        return self._stage(StageKind.TASK)

    def _task_for(self, task_id: str, context_id: str) -> Task:
        if self._task is None:
            # A stream that opens with an update (not a task) still names the task it is about.
            self._task = Task(id=task_id, context_id=context_id)
        self._check_id(task_id)
        return self._task

    def _check_id(self, task_id: str) -> None:
        if self._task is not None and task_id != self._task.id:
            raise MerchantError(f"the merchant answered about task {task_id!r}", task_id=self._task.id)

    def _stage(self, kind: StageKind, *, artifact: Artifact | None = None) -> PaymentStage:
        payment = self.payment
        status = self.task.status
        return PaymentStage(
            kind,
            self.task.id,
            status.state,
            payment=payment,
            message=get_message_text(status.message) if status.HasField("message") else None,
            artifact=artifact,
            transaction=transaction_of(payment),
        )


def transaction_of(payment: PaymentData | None) -> str | None:
    """The settlement transaction extension data names: pending, or the newest receipt's."""
    if isinstance(payment, PaymentVerifiedData):
        return payment.pending_transaction
    if isinstance(payment, PaymentCompletedData | PaymentFailedData) and payment.receipts:
        return payment.receipts[-1].transaction or None
    return None


def _merge_artifact(task: Task, update: TaskArtifactUpdateEvent) -> None:
    for existing in task.artifacts:
        if existing.artifact_id == update.artifact.artifact_id:
            if update.append:
                existing.parts.extend(update.artifact.parts)
            else:
                existing.CopyFrom(update.artifact)
            return
    task.artifacts.append(update.artifact)


def failure_of(task: Task, payment: PaymentData | None, *, signed: bool) -> PaymentFailedError:
    """The error for a task that ended failed, canceled or rejected, with the merchant's code and receipts."""
    error = payment.error if isinstance(payment, PaymentFailedData) else None
    receipts = payment.receipts if isinstance(payment, PaymentFailedData) else ()
    text = get_message_text(task.status.message) if task.status.HasField("message") else ""
    reason = f" ({error.value})" if error is not None else ""
    summary = f"the task ended {TaskState.Name(task.status.state)}{reason}"
    return PaymentFailedError(
        f"{summary}: {text}" if text else summary,
        task_id=task.id,
        state=task.status.state,
        error=error,
        receipts=receipts,
        signed=signed,
    )
