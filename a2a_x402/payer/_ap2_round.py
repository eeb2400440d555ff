"""The embedded flow in a payment run (§20.3 to §20.6): when the payer pays a round with AP2 mandates, what
it checks before signing, what it presents, and how the round's end settles its own usage record.

``Ap2Rounds.prepare`` runs after the policy chose the entry to pay and before anything is signed: for a
tenant the card declares in ``params.ap2`` and a task carrying an ``ap2-checkout``, it verifies the
checkout (``_ap2_offer``) and checks the user's open mandates against it, reserving their use
(``_ap2_sdk.prepare_mandates``). Without mandates it lets the payment go standalone, unless the tenant
says ``required: true``. ``Ap2Round.close`` signs the closed mandates over the signed payment.

Afterwards the round's outcome resolves the reservation: a refusal of the mandates (``ap2Error``) or a
round that ended with nothing settled releases it, a completed task confirms it. The merchant's AP2
receipts, when it sends them, are verified with the tenant's keys: error receipts release, success
receipts confirm and are returned with the result. Receipts that do not verify are logged and dropped;
the task's state then decides. No mandate, receipt or key is ever put in a log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import SendMessageRequest, Task
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from a2a_x402.agentcard import JwksCache
from a2a_x402.extension import EXTENSION_URI, Ap2Declaration, Ap2ErrorCode, Ap2Mandates, Ap2Receipts
from a2a_x402.facilitator.wire import PaymentRequirements

from ._ap2_offer import Ap2Offer, ReceiptError, checkout_artifact, receipts_of, tenant_declaration
from ._ap2_sdk import OpenMandates, PreparedMandates, prepare_mandates
from ._card import ResolvedCard
from ._errors import (
    CardError,
    MandatesNotSupportedError,
    MandatesRefusedError,
    MandatesRequiredError,
    MerchantError,
    UnresolvedConstraintError,
)
from ._merchant_calls import MerchantCalls
from ._messages import payment_message
from ._stages import PaymentStage, SignedPayment, TaskView

__all__ = ["Ap2Round", "Ap2Rounds", "mandates_refusal"]

logger = logging.getLogger(__name__)

_REFUSALS: Mapping[str, type[MandatesRefusedError]] = {
    Ap2ErrorCode.UNRESOLVED_CONSTRAINT: UnresolvedConstraintError,
    Ap2ErrorCode.MANDATES_NOT_SUPPORTED: MandatesNotSupportedError,
}


@dataclass(slots=True)
class Ap2Round:
    """One round paid with mandates: the reservation and, once closed, the mandates presented."""

    prepared: PreparedMandates
    mandates: Ap2Mandates | None = None

    async def close(self, payment_payload: Mapping[str, Any]) -> Ap2Mandates:
        """Sign the closed mandates over the payment (off the event loop).

        Raises:
            MandateConstraintError: they cannot be closed over it (the caller releases the round).
        """
        self.mandates = await asyncio.to_thread(self.prepared.close, payment_payload)
        return self.mandates

    async def release(self) -> None:
        """Nothing was settled under the round's mandates: their budget gets the amount back (off the
        event loop: the record may be a file)."""
        await asyncio.to_thread(self.prepared.use.release)

    async def confirm(self) -> None:
        """The round's payment was settled: its use counts for good."""
        await asyncio.to_thread(self.prepared.use.confirm)


def mandates_refusal(exc: MerchantError) -> str | None:
    """The ``ap2Error`` of a merchant's refusal of a payment message, or ``None`` for another refusal."""
    cause = exc.__cause__
    data = cause.data if isinstance(cause, A2AError) else None
    code = data.get("ap2Error") if isinstance(data, Mapping) else None
    return code if isinstance(code, str) else None


class Ap2Rounds:
    """The embedded flow for one payer and tenant: ``None`` of everything when the card declares no
    ``params.ap2`` entry for the tenant.

    Raises:
        CardError: the card's ``params.ap2`` is malformed or points off its origin (only with mandates:
            a payer without them pays standalone, and the merchant refuses what it must).
    """

    def __init__(
        self, card: ResolvedCard, tenant: str, mandates: OpenMandates | None, jwks: JwksCache
    ) -> None:
        self._card = card
        self._mandates = mandates
        self.declaration: Ap2Declaration | None = None
        try:
            self.declaration = tenant_declaration(
                card, tenant, allow_insecure_localhost=jwks.allow_insecure_localhost
            )
        except CardError as exc:
            if mandates is not None:
                raise
            logger.warning("paying without AP2 mandates: %s", exc)
        self._offer = Ap2Offer(self.declaration, jwks) if self.declaration is not None else None

    async def prepare(self, task: Task, requirements: PaymentRequirements, payer: str) -> Ap2Round | None:
        """Check the round's checkout and the open mandates before the payment is signed, and reserve
        their use; ``None``: pay this round standalone.

        Raises:
            MandatesRequiredError: the tenant requires mandates, and the payer has none or the merchant
                offered no checkout.
            CheckoutInvalidError: the checkout fails a check of §20.3.
            MandateConstraintError: the open mandates do not allow this payment (nothing counted).
        """
        if self._offer is None or self.declaration is None:
            return None
        required = self.declaration.required
        if self._mandates is None:
            if required:
                raise MandatesRequiredError(
                    "the tenant takes payments only with AP2 mandates, and the payer has none"
                )
            return None
        jwt = checkout_artifact(task)
        if jwt is None:
            if required:
                raise MandatesRequiredError(
                    "the tenant takes payments only with AP2 mandates, and its terms carry no checkout"
                )
            logger.info("task %s: no AP2 checkout with the terms; paying without mandates", task.id)
            return None
        metadata = MessageToDict(task.status.message.metadata).get(EXTENSION_URI, {})
        await self._offer.verified_checkout(jwt, metadata.get("required", {}), self._card)
        offer_id = (requirements.extra or {}).get("offerId")
        prepared = await asyncio.to_thread(
            prepare_mandates,
            self._mandates,
            jwt,
            self.declaration.merchant.id,
            str(offer_id),
            f"{requirements.network}:{payer}",
            now=int(time.time()),
        )
        return Ap2Round(prepared)

    async def submit(
        self,
        calls: MerchantCalls,
        view: TaskView,
        streaming: bool,
        payload: SignedPayment,
        ap2_round: Ap2Round | None,
        *,
        fallback: bool,
    ) -> AsyncIterator[PaymentStage]:
        """Present the signed payment with the round's mandates, if any; when the merchant answers
        ``mandates_not_supported`` and ``fallback`` allows it, present the same payment without them.

        Raises:
            MandatesRefusedError: the merchant refused the mandates (see ``refused``).
        """
        mandates = ap2_round.mandates if ap2_round is not None else None
        message = payment_message(view.task, payload, mandates)
        try:
            async for stage in calls.submit(SendMessageRequest(message=message), view, streaming):
                yield stage
            return
        except MerchantError as exc:
            code = mandates_refusal(exc)
            if ap2_round is None or code is None:
                raise
            await self.refused(ap2_round, exc, code, fallback=fallback)
        standalone = SendMessageRequest(message=payment_message(view.task, payload))
        async for stage in calls.submit(standalone, view, streaming):
            yield stage

    async def refused(self, ap2_round: Ap2Round, exc: MerchantError, code: str, *, fallback: bool) -> None:
        """The merchant refused the round's mandates with ``code``; return when the payment may go again
        without them (``mandates_not_supported`` and ``fallback``: their use is then released).

        The use is released when the merchant's error receipts verify: the merchant holds the signed
        payment, and only its signed word says the mandates were not used. Without them it stays counted.

        Raises:
            MandatesRefusedError: (or its subclass for ``code``) otherwise.
        """
        cause = exc.__cause__
        data = cause.data if isinstance(cause, A2AError) and isinstance(cause.data, Mapping) else {}
        receipts = None
        checkout, payment = data.get("ap2CheckoutReceipt"), data.get("ap2PaymentReceipt")
        if isinstance(checkout, str) and isinstance(payment, str):
            receipts = await self._verified(ap2_round, Ap2Receipts(checkout, payment), "Error", exc.task_id)
        if code == Ap2ErrorCode.MANDATES_NOT_SUPPORTED and fallback:
            logger.info("task %s: the merchant takes no AP2 mandates; paying without them", exc.task_id)
            await ap2_round.release()  # the payment goes on outside the mandates
            ap2_round.mandates = None
            return
        if receipts is not None:
            await ap2_round.release()
        else:
            logger.info("task %s: refused mandates without verified error receipts stay counted", exc.task_id)
        kind = _REFUSALS.get(code, MandatesRefusedError)
        raise kind(
            f"the merchant refused the AP2 mandates ({code[:64]})",
            ap2_error=code,
            receipts=receipts,
            task_id=exc.task_id or "",
        ) from exc

    async def settle(self, ap2_round: Ap2Round, task: Task, *, settled: bool) -> Ap2Receipts | None:
        """The round ended (``settled``: the task completed): the use is confirmed, or released only on the
        merchant's signed word, error receipts that verify, since the merchant still holds the signed
        payment and could settle it later; the success receipts, verified, or ``None``."""
        receipts = None
        if task.status.HasField("message"):
            try:
                receipts = receipts_of(task.status.message)
            except ReceiptError as exc:
                logger.warning("task %s: %s", task.id, exc)
        wanted = "Success" if settled else "Error"
        verified = await self._verified(ap2_round, receipts, wanted, task.id) if receipts else None
        if settled:
            await ap2_round.confirm()
        elif verified is not None:
            await ap2_round.release()
        else:
            logger.info(
                "task %s: a round ended unpaid without verified error receipts stays counted", task.id
            )
        return verified if settled else None

    async def _verified(
        self, ap2_round: Ap2Round, receipts: Ap2Receipts, wanted: str, task_id: str | None
    ) -> Ap2Receipts | None:
        if self._offer is None or ap2_round.mandates is None:
            return None
        try:
            status = await self._offer.verified_receipts(
                receipts,
                ap2_round.mandates.checkout_mandate,
                ap2_round.mandates.payment_mandate,
                ap2_round.prepared.nonce,
            )
        except ReceiptError as exc:
            logger.warning("task %s: the merchant's AP2 receipts are not used: %s", task_id, exc)
            return None
        if status != wanted:
            logger.warning(
                "task %s: the merchant's AP2 receipts say %s, the task says otherwise", task_id, status
            )
            return None
        return receipts
