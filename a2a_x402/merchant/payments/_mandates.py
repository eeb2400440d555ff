"""The embedded flow's mandates (specification §20.5) checked before a payment's presentation is recorded.

A round offered with a checkout (its tenant declared `ap2`, `_checkouts`) takes the closed mandates of
§20.4 in a `data` part beside the payment. They are verified (`ap2.verify_mandates`) before anything of the
payment is recorded, and their use is counted (`MandateUsageStore.reserve_in`) in the transaction that
records the presentation: a refusal, at either moment, leaves nothing behind. A tenant with `required`
refuses such a round's payment without mandates. Mandates sent to a tenant without `ap2`, or for a round
offered without a checkout, are refused `mandates_not_supported` (ignored, their constraints would go
unenforced); a payment without them is paid as before.

A refusal of mandates that could be read carries the merchant's error receipts (§20.6), so the agent knows
they were not used. Accepted mandates leave what the round's receipts answer in the request's state
(`ROUND_MANDATES_KEY`), for the status that ends the round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import sqlalchemy as sa
from a2a.server.context import ServerCallContext
from a2a.types import Message
from a2a.utils.errors import InternalError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from a2a_x402.extension import (
    AP2_CHECKOUT_MANDATE_KEY,
    AP2_PAYMENT_MANDATE_KEY,
    Ap2Declaration,
    Ap2ErrorCode,
    Ap2Mandates,
    Ap2Receipts,
    ExtensionMetadataError,
    PaymentSubmittedData,
    parse_ap2_mandates,
)

from ..ap2 import (
    CheckoutKeys,
    MandateRefused,
    MandateUsageStore,
    ReceiptSubject,
    StoredCheckoutError,
    TrustedIssuers,
    error_receipts,
    issuer_kids,
    mandate_reference,
    verify_mandates,
)
from ._offer_table import Offer
from ._refusals import mandate_refusal

__all__ = ["ROUND_MANDATES_KEY", "PaymentMandates", "Reserve", "mandates_of", "receipt_subject"]

logger = logging.getLogger(__name__)

ROUND_MANDATES_KEY = "x402_round_mandates"
"""The `ServerCallContext.state` key under which accepted mandates leave the `ReceiptSubject` of their round:
what the receipts of the status that ends it answer."""

Reserve = Callable[[sa.Connection], None]
"""Counts accepted mandates inside the write that records the payment's presentation."""

_MANDATE_KEYS = (AP2_CHECKOUT_MANDATE_KEY, AP2_PAYMENT_MANDATE_KEY)


class PaymentMandates:
    """The mandates check of the tenants in the embedded flow (each declaration with the issuer keys it
    trusts and its checkout keys, which sign the receipts), over their usage record in `usage`. Without any
    such tenant it still refuses mandates (`mandates_not_supported`)."""

    def __init__(
        self,
        declarations: Iterable[tuple[Ap2Declaration, TrustedIssuers, CheckoutKeys]],
        usage: MandateUsageStore,
    ) -> None:
        self._tenants = {entry[0].tenant: entry for entry in declarations}
        self._usage = usage

    async def check(
        self,
        call_context: ServerCallContext,
        offer: Offer,
        data: PaymentSubmittedData,
        message: Message,
        *,
        payment_hash: str | None = None,
    ) -> Reserve | None:
        """Verify the mandates `message` carries for the payment `data` of `offer`'s round, for the tenant of
        `call_context`; accepted, their `ReceiptSubject` goes into its state (`ROUND_MANDATES_KEY`), and
        their use is of that payment (`payment_hash`, as the offers name a payment taken): only its
        settlement confirms the use.

        Returns:
            What counts them with the presentation, or None: the payment comes without mandates and its
            tenant (or round) takes it so.

        Raises:
            InvalidParamsError: the mandates are refused, or missing where the tenant requires them; its
                `data` holds the `ap2Error`, and the error receipts when the mandates could be read.
        """
        declared = self._tenants.get(call_context.tenant)
        if declared is None or offer.checkout_jwt is None:
            if _has_mandates_part(message):
                refused = MandateRefused(
                    Ap2ErrorCode.MANDATES_NOT_SUPPORTED,
                    "this tenant takes no AP2 mandates"
                    if declared is None
                    else "this round was offered without an AP2 checkout",
                )
                raise mandate_refusal(refused) from None
            return None
        declaration, trusted, keys = declared
        mandates = None
        try:
            mandates = mandates_of(message)
            if mandates is None:
                if not declaration.required:
                    return None
                raise MandateRefused(
                    Ap2ErrorCode.INVALID_MANDATE, "this merchant takes payments only with AP2 mandates"
                )
            # The keys of the issuers the mandates name, an https source fetched if it must be (§20.5 step 1).
            issuers = await trusted.keys_for(issuer_kids(mandates))
            accepted = await verify_mandates(
                declaration,
                issuers,
                checkout_jwt=offer.checkout_jwt,
                payment=data.payload,
                mandates=mandates,
                usage=self._usage.usage,
                now=int(time.time()),
            )
        except MandateRefused as refused:
            subject = None if mandates is None else receipt_subject(mandates, offer)
            raise mandate_refusal(refused, _receipts(keys, declaration, subject, refused)) from None
        except StoredCheckoutError as exc:
            # The merchant's own record is at fault: said to the operator, never blamed on the mandates.
            logger.error("task %s: its round's AP2 checkout cannot be read: %s", offer.task_id, exc)
            raise InternalError(
                message="this round's AP2 checkout cannot be read; nothing was taken: ask for new terms"
            ) from None
        subject = accepted.receipt_subject(offer.task_id)
        call_context.state[ROUND_MANDATES_KEY] = subject

        tenant = call_context.tenant

        def reserve(connection: sa.Connection) -> None:
            try:
                self._usage.reserve_in(
                    connection,
                    accepted,
                    tenant=tenant,
                    task_id=offer.task_id,
                    round_=offer.round,
                    payment_hash=payment_hash,
                )
            except MandateRefused as refused:
                raise mandate_refusal(refused, _receipts(keys, declaration, subject, refused)) from None

        return reserve


def receipt_subject(mandates: Ap2Mandates, offer: Offer) -> ReceiptSubject | None:
    """What the receipts of `offer`'s round answer for `mandates`, read but not necessarily accepted: None
    when their references cannot be read (not ending in an SD-JWT) or the round names no `offerId`."""
    accepts = offer.required.get("accepts") if isinstance(offer.required, dict) else None
    extra = accepts[0].get("extra") if isinstance(accepts, list) and accepts else None
    offer_id = extra.get("offerId") if isinstance(extra, dict) else None
    try:
        return ReceiptSubject(
            checkout_reference=mandate_reference(mandates.checkout_mandate),
            payment_reference=mandate_reference(mandates.payment_mandate),
            order_id=offer.task_id,
            payment_id=offer_id if isinstance(offer_id, str) else "",
        )
    except ValueError:
        return None


def _receipts(
    keys: CheckoutKeys, declaration: Ap2Declaration, subject: ReceiptSubject | None, refused: MandateRefused
) -> Ap2Receipts | None:
    """The error receipts of a refusal (§20.6), signed now with the tenant's checkout key."""
    if subject is None:
        return None
    return error_receipts(
        keys,
        subject,
        merchant=declaration.merchant,
        error=refused.code,
        description=refused.detail or refused.code.value,
        now=int(time.time()),
    )


def _has_mandates_part(message: Message) -> bool:
    """Whether `message` carries a data part with a mandate (read or not)."""
    return any(_is_mandates_part(part.data) for part in message.parts if part.HasField("data"))


def _is_mandates_part(data: Value) -> bool:
    return data.HasField("struct_value") and any(key in data.struct_value.fields for key in _MANDATE_KEYS)


def mandates_of(message: Message) -> Ap2Mandates | None:
    """The mandates `data` part of `message` (§20.4), or None without one.

    Raises:
        MandateRefused: `invalid_credential` for a mandates part not of the schema's form, or two of them.
    """
    found = [part.data for part in message.parts if part.HasField("data") and _is_mandates_part(part.data)]
    if not found:
        return None
    if len(found) > 1:
        raise MandateRefused(Ap2ErrorCode.INVALID_CREDENTIAL, "the message carries two mandates parts")
    try:
        return parse_ap2_mandates(MessageToDict(found[0]))
    except ExtensionMetadataError as exc:
        raise MandateRefused(Ap2ErrorCode.INVALID_CREDENTIAL, f"malformed mandates part: {exc}") from None
