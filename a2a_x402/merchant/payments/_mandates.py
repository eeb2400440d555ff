"""The embedded flow's mandates (specification §20.5) checked before a payment's presentation is recorded.

A round offered with a checkout (its tenant declared `ap2`, `_checkouts`) takes the closed mandates of
§20.4 in a `data` part beside the payment. They are verified (`ap2.verify_mandates`) before anything of the
payment is recorded, and their use is counted (`MandateUsageStore.reserve_in`) in the transaction that
records the presentation: a refusal, at either moment, leaves nothing behind. A tenant with `required`
refuses such a round's payment without mandates. Any other round, and any tenant without `ap2`, is paid as
before: its mandates part, if any, is not read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import sqlalchemy as sa
from a2a.types import Message
from google.protobuf.json_format import MessageToDict

from a2a_x402.extension import (
    AP2_CHECKOUT_MANDATE_KEY,
    AP2_PAYMENT_MANDATE_KEY,
    Ap2Declaration,
    Ap2ErrorCode,
    Ap2Mandates,
    ExtensionMetadataError,
    PaymentSubmittedData,
    parse_ap2_mandates,
)

from ..ap2 import MandateRefused, MandateUsageStore, TrustedIssuers, issuer_kids, verify_mandates
from ._offer_table import Offer
from ._refusals import mandate_refusal

__all__ = ["PaymentMandates", "Reserve"]

Reserve = Callable[[sa.Connection], None]
"""Counts accepted mandates inside the write that records the payment's presentation."""

_MANDATE_KEYS = (AP2_CHECKOUT_MANDATE_KEY, AP2_PAYMENT_MANDATE_KEY)


class PaymentMandates:
    """The mandates check of the tenants in the embedded flow, over their usage record in `usage`."""

    def __init__(
        self,
        declarations: Iterable[tuple[Ap2Declaration, TrustedIssuers]],
        usage: MandateUsageStore,
    ) -> None:
        self._tenants = {declaration.tenant: (declaration, issuers) for declaration, issuers in declarations}
        self._usage = usage

    async def check(
        self, tenant: str, offer: Offer, data: PaymentSubmittedData, message: Message
    ) -> Reserve | None:
        """Verify the mandates `message` carries for the payment `data` of `offer`'s round.

        Returns:
            What counts them with the presentation, or None: the round is not in the embedded flow, or
            its tenant takes the payment without mandates.

        Raises:
            InvalidParamsError: the mandates are refused, or missing where the tenant requires them; its
                `data` holds the `ap2Error`.
        """
        declared = self._tenants.get(tenant)
        if declared is None or offer.checkout_jwt is None:
            return None
        declaration, trusted = declared
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
            raise mandate_refusal(refused) from None

        def reserve(connection: sa.Connection) -> None:
            try:
                self._usage.reserve_in(
                    connection, accepted, tenant=tenant, task_id=offer.task_id, round_=offer.round
                )
            except MandateRefused as refused:
                raise mandate_refusal(refused) from None

        return reserve


def mandates_of(message: Message) -> Ap2Mandates | None:
    """The mandates `data` part of `message` (§20.4), or None without one.

    Raises:
        MandateRefused: `invalid_credential` for a mandates part not of the schema's form, or two of them.
    """
    found = [
        part.data
        for part in message.parts
        if part.HasField("data")
        and part.data.HasField("struct_value")
        and any(key in part.data.struct_value.fields for key in _MANDATE_KEYS)
    ]
    if not found:
        return None
    if len(found) > 1:
        raise MandateRefused(Ap2ErrorCode.INVALID_CREDENTIAL, "the message carries two mandates parts")
    try:
        return parse_ap2_mandates(MessageToDict(found[0]))
    except ExtensionMetadataError as exc:
        raise MandateRefused(Ap2ErrorCode.INVALID_CREDENTIAL, f"malformed mandates part: {exc}") from None
