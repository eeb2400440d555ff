"""The embedded flow's mandates check with its records: the evidence kept, the outcomes counted.

`KeptMandates` is `PaymentMandates` (verify, then count the use with the presentation) plus what the
merchant keeps of it: the accepted mandates, as presented, are written to the AP2 evidence (`ap2._evidence`)
in the same transaction as their use and the presentation, and every decision is told to a listener
(the `x402_ap2_mandates_total` metric) as accepted, or refused with its `ap2Error` code.

A decision is told once per check: "accepted" once the use is counted in the presentation's write,
"refused" when the verification or the reservation refused the mandates. A round without mandates (its
tenant takes payments without them) is not a decision and is not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import sqlalchemy as sa
from a2a.server.context import ServerCallContext
from a2a.types import Message
from a2a.utils.errors import InvalidParamsError

from a2a_x402.extension import Ap2Declaration, Ap2ErrorCode, PaymentSubmittedData

from ..ap2 import Ap2EvidenceStore, CheckoutKeys, MandateUsageStore, TrustedIssuers
from ._mandates import PaymentMandates, Reserve, mandates_of
from ._offer_table import Offer

__all__ = ["MANDATE_CODES", "KeptMandates", "MandatesListener"]

MandatesListener = Callable[[str, str, str], None]
"""Told each decision on a payment's mandates: (tenant id, "accepted" or "refused", the `ap2Error` code,
"" when accepted)."""

MANDATE_CODES = frozenset(code.value for code in Ap2ErrorCode)
"""The codes a refusal is told with; any other would be told as "other" (the metric's labels stay few)."""


class KeptMandates(PaymentMandates):
    """`PaymentMandates` whose accepted mandates are kept in `evidence` and whose decisions go to
    `on_decision`."""

    def __init__(
        self,
        declarations: Iterable[tuple[Ap2Declaration, TrustedIssuers, CheckoutKeys]],
        usage: MandateUsageStore,
        *,
        evidence: Ap2EvidenceStore,
        on_decision: MandatesListener | None = None,
    ) -> None:
        super().__init__(declarations, usage)
        self._evidence = evidence
        self._on_decision = on_decision

    async def check(
        self,
        call_context: ServerCallContext,
        offer: Offer,
        data: PaymentSubmittedData,
        message: Message,
        *,
        payment_hash: str | None = None,
    ) -> Reserve | None:
        """`PaymentMandates.check`, whose reservation also keeps the mandates as evidence.

        Raises:
            InvalidParamsError: as `PaymentMandates.check`, the refusal told to the listener first.
        """
        tenant = call_context.tenant
        try:
            reserve = await super().check(call_context, offer, data, message, payment_hash=payment_hash)
        except InvalidParamsError as refusal:
            self._tell(tenant, refusal)
            raise
        # Verified: the mandates part was read already, so reading it again cannot fail.
        mandates = mandates_of(message) if reserve is not None else None
        if reserve is None or mandates is None or offer.checkout_jwt is None:
            return reserve
        checkout_jwt = offer.checkout_jwt
        told = False  # a write retried after its commit failed must not count the decision twice

        def reserve_and_keep(connection: sa.Connection) -> None:
            nonlocal told
            try:
                reserve(connection)
            except InvalidParamsError as refusal:
                if not told:
                    told = True
                    self._tell(tenant, refusal)
                raise
            self._evidence.keep_in(
                connection,
                tenant=tenant,
                task_id=offer.task_id,
                round_=offer.round,
                checkout_jwt=checkout_jwt,
                mandates=mandates,
            )
            if not told:
                told = True
                self._tell(tenant, None)

        return reserve_and_keep

    def _tell(self, tenant: str, refusal: InvalidParamsError | None) -> None:
        if self._on_decision is None:
            return
        if refusal is None:
            self._on_decision(tenant, "accepted", "")
            return
        code = refusal.data.get("ap2Error") if isinstance(refusal.data, dict) else None
        self._on_decision(tenant, "refused", code if code in MANDATE_CODES else "other")
