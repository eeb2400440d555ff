"""How a taken payment ended, told to whoever counts them, and the log line of each that was not settled.

Every payment the executor takes ends in exactly one outcome: `settled`; `refused` (not taken: the client
gets fresh terms, e.g. expired or underfunded); or `failed` (the task failed with `payment-failed`,
nothing charged unless the receipts say otherwise). Each refused or failed payment is one WARNING line
with the task, the tenant, the extension's error code and the facilitator's reason.

The status that ends a round whose AP2 mandates were accepted (§20.6) carries the merchant's receipts in a
`data` part beside its text (`add_ap2_receipts`): success receipts on `payment-completed`, error receipts
with the extension object's `error` on `payment-failed` and on fresh terms. A status recovery writes gets
them too (`add_recovered_ap2_receipts`), from the mandates of the task's history that the round's use
names. Both return the receipts, which the caller keeps with the round's AP2 evidence (`keep_ap2_receipts`;
`end_ap2_round` does both for the executor) before the status goes out; a failure to keep them is one
WARNING line and never stops the status.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from enum import StrEnum

from a2a.server.agent_execution import RequestContext
from a2a.types import Message, Part, TaskStatusUpdateEvent
from google.protobuf.struct_pb2 import Value

from a2a_x402.extension import (
    RETRYABLE_ERROR_CODES,
    Ap2Receipts,
    PaymentCompletedData,
    PaymentData,
    PaymentErrorCode,
    PaymentFailedData,
)
from a2a_x402.facilitator import PERMIT2_ADDRESS
from a2a_x402.facilitator.wire import Reason

from ..ap2 import (
    Ap2EvidenceStore,
    MandateRefused,
    ReceiptSubject,
    Reservation,
    error_receipts,
    success_receipts,
)
from ..tenants import TenantRegistry, tenant_name
from ._mandates import ROUND_MANDATES_KEY, mandates_of, receipt_subject
from ._offer_table import Offer
from ._refusals import client_text

__all__ = [
    "OutcomeListener",
    "PaymentOutcome",
    "add_ap2_receipts",
    "add_recovered_ap2_receipts",
    "end_ap2_round",
    "failure_text",
    "keep_ap2_receipts",
    "log_unpaid",
]

logger = logging.getLogger("a2a_x402.merchant.payments")


class PaymentOutcome(StrEnum):
    """How a taken payment ended."""

    SETTLED = "settled"
    REFUSED = "refused"
    FAILED = "failed"


OutcomeListener = Callable[[str, PaymentOutcome], None]
"""Told `(tenant name, outcome)` once per payment taken (the default tenant as `default`)."""


# Reasons a verification or settlement gives when it was not made at all: the node or the facilitator
# did not answer, or failed unexpectedly. Their messages are the facilitator's own ("…; try again", meant
# for a caller holding the idempotency key, or an exception's text), not words for the payer.
_NOT_MADE = frozenset({Reason.UNEXPECTED_SETTLE_ERROR, Reason.UNEXPECTED_VERIFY_ERROR})
_AGAIN = {
    PaymentErrorCode.INSUFFICIENT_FUNDS: "fund the payer, then pay the new terms",
    PaymentErrorCode.EXPIRED_PAYMENT: "sign the new terms and pay again",
}
_ENDED = "nothing was charged; this task has ended: send the request again{when} for new terms"
_UNREACHED = "the facilitator could not be reached, or could not reach the chain"
_USED = "this task has ended: send the request again for new terms"
# A Permit2 payment of a payer that never approved Permit2 on the token (and brought no EIP-2612 permit of
# it): the one thing to do is said, whatever words the facilitator used.
_NO_ALLOWANCE = (
    f"the payer has not approved Permit2 ({PERMIT2_ADDRESS}) to move this token; nothing was charged: "
    "approve Permit2 on the token once (or sign the eip2612GasSponsoring extension's permit with the "
    "payment), then send the request again"
)


def failure_text(
    stage: str, code: PaymentErrorCode, reason: str, said: str | None, *, ended: bool = False
) -> str:
    """What the payer reads when `stage` ("Settlement", "Payment verification") failed with `code`: what
    went wrong in our own words (`client_text`: the facilitator's text `said` is never shown), then what to
    do.

    A retryable code comes with fresh terms on the same task, unless the task `ended` anyway (recovery
    fails a task whatever the code); any other ends the task uncharged, so "try again" can only mean a new
    request (later, when the merchant's chain or facilitator did not answer).
    """
    if code is PaymentErrorCode.DUPLICATE_NONCE:
        # The authorization moved money, just not for this task: "nothing was charged" would be false.
        return f"{stage} failed: {client_text(code, said)}, not by this merchant for this task; {_USED}"
    if code in RETRYABLE_ERROR_CODES and not ended:
        return f"{stage} failed: {client_text(code, said)}; {_AGAIN.get(code, 'pay the new terms')}"
    if reason in _NOT_MADE:
        return f"{stage} failed: {_UNREACHED}; {_ENDED.format(when=' later')}"
    if reason == Reason.PERMIT2_ALLOWANCE_REQUIRED:
        return f"{stage} failed: {_NO_ALLOWANCE}"
    return f"{stage} failed: {client_text(code, said)}; {_ENDED.format(when='')}"


def log_unpaid(
    task_id: str, tenant: str, outcome: PaymentOutcome, error_code: str, reason: str | None, message: str
) -> None:
    """The WARNING line of a payment refused or failed."""
    logger.warning(
        "payment for task %s of tenant %s %s: %s (reason %s): %s",
        task_id,
        tenant_name(tenant),
        outcome.value,
        error_code,
        reason or "none",
        message,
        extra={
            "task_id": task_id,
            "tenant": tenant_name(tenant),
            "outcome": outcome.value,
            "error_code": error_code,
            "reason": reason,
        },
    )


def add_ap2_receipts(
    event: TaskStatusUpdateEvent,
    context: RequestContext,
    tenants: TenantRegistry,
    *,
    error: PaymentErrorCode | None = None,
    transaction: str | None = None,
    network: str = "",
) -> Ap2Receipts | None:
    """Add the AP2 receipts of the round ending with `event` to its message (§20.6), when this request's
    mandates were accepted for it (`ROUND_MANDATES_KEY`): success receipts naming `transaction` on
    `network`, or error receipts with `error` and the status's text as their description. The receipts
    added, or None."""
    state = context.call_context.state if context.call_context is not None else {}
    subject = state.get(ROUND_MANDATES_KEY)
    if not isinstance(subject, ReceiptSubject):
        return None
    return _add_receipts(event, subject, tenants, context.tenant, error, transaction, network)


async def end_ap2_round(
    event: TaskStatusUpdateEvent,
    context: RequestContext,
    tenants: TenantRegistry,
    evidence: Ap2EvidenceStore | None,
    round_: int,
    *,
    error: PaymentErrorCode | None = None,
    transaction: str | None = None,
    network: str = "",
) -> None:
    """`add_ap2_receipts` to `event`, which ends round `round_`, then `keep_ap2_receipts` with its
    `evidence`: before the status goes out, so that a client told of the round finds its evidence whole."""
    receipts = add_ap2_receipts(
        event, context, tenants, error=error, transaction=transaction, network=network
    )
    await keep_ap2_receipts(evidence, event.task_id, round_, receipts)


def add_recovered_ap2_receipts(
    event: TaskStatusUpdateEvent,
    history: Iterable[Message],
    offer: Offer,
    tenants: TenantRegistry,
    use: Reservation | None,
    data: PaymentData,
) -> Ap2Receipts | None:
    """`add_ap2_receipts` for a status that recovery writes to end `offer`'s round with `data`: the
    mandates are those of the task's `history` message whose payment mandate is the round's `use`."""
    if use is None or use.round != offer.round:
        return None
    for message in reversed(list(history)):
        try:
            mandates = mandates_of(message)
        except MandateRefused:
            continue
        subject = None if mandates is None else receipt_subject(mandates, offer)
        if subject is None or subject.payment_reference != use.reference:
            continue
        if isinstance(data, PaymentFailedData):
            return _add_receipts(event, subject, tenants, offer.tenant, data.error, None, "")
        if isinstance(data, PaymentCompletedData):
            paid = next((r for r in reversed(data.receipts) if r.success), None)
            if paid is not None:
                return _add_receipts(
                    event, subject, tenants, offer.tenant, None, paid.transaction, paid.network
                )
        return None
    return None


async def keep_ap2_receipts(
    evidence: Ap2EvidenceStore | None, task_id: str, round_: int, receipts: Ap2Receipts | None
) -> None:
    """Keep the `receipts` that end round `round_` of `task_id` with its AP2 evidence (§20.6), when both
    are there. Never raises: the round's status goes out whether or not its evidence could be written."""
    if evidence is None or receipts is None:
        return
    try:
        await evidence.add_receipts(
            task_id,
            round_,
            checkout_receipt=receipts.checkout_receipt,
            payment_receipt=receipts.payment_receipt,
        )
    except Exception as exc:  # noqa: BLE001 - the evidence must never fail the paid turn
        # The type only: a database error's text repeats its parameters, the receipts.
        logger.warning(
            "task %s: the AP2 receipts of round %d were not kept as evidence: %s",
            task_id,
            round_,
            type(exc).__name__,
        )


def _add_receipts(
    event: TaskStatusUpdateEvent,
    subject: ReceiptSubject,
    tenants: TenantRegistry,
    tenant_id: str,
    error: PaymentErrorCode | None,
    transaction: str | None,
    network: str,
) -> Ap2Receipts | None:
    tenant = tenants.get(tenant_id)
    ap2 = tenant.ap2 if tenant is not None else None
    # A metered round settled for 0 moved nothing: no transaction for a payment receipt to confirm.
    if ap2 is None or transaction == "":
        return None
    now, keys = int(time.time()), ap2.checkout_keys
    try:
        if transaction is not None:
            receipts = success_receipts(
                keys, subject, merchant=ap2.merchant, transaction=transaction, network=network, now=now
            )
        else:
            text = " ".join(part.text for part in event.status.message.parts if part.text)
            code = error or PaymentErrorCode.SETTLEMENT_FAILED
            receipts = error_receipts(
                keys, subject, merchant=ap2.merchant, error=code, description=text, now=now
            )
    except ValueError as exc:
        # A facilitator's answer a receipt cannot name (not a transaction hash): the round still ends.
        logger.warning("task %s: its AP2 receipts could not be issued: %s", event.task_id, exc)
        return None
    data = Value()
    data.struct_value.update(receipts.to_wire())
    event.status.message.parts.append(Part(data=data, media_type="application/json"))
    return receipts
