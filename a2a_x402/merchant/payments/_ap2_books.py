"""What the books say of a payment made with AP2 mandates (§20): the references its ledger entry carries.

A round's accepted mandates are counted, with its payment's presentation, as one use in the usage record
(`ap2.MandateUsageStore`, table `ap2_mandate_uses`): the closed payment mandate's reference (the payment
receipt's `reference`), the open mandate it counts against, and the hash of the round's checkout. The
settlement of that round is booked with the same three (`ledger.Ap2References`), read in the booking's
own transaction from the round's use that counts (reserved, or confirmed once settled), and its
`settlement.pending` and `settlement.failed` events, which have no journal entry, carry them as `ap2`
(`ap2_event_data`) as the entry's events do. A round paid without mandates has no such use, and its
entry and events none.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..ap2 import UseState, use_of_payment
from ..ledger import Ap2Lookup, Ap2References
from ..webhooks import Ap2Data

__all__ = ["ap2_event_data", "round_ap2"]

# The columns read of the usage record's table (`ap2._usage`, migration m0016).
_uses = sa.table(
    "ap2_mandate_uses",
    sa.column("reference"),
    sa.column("open_mandate"),
    sa.column("checkout_hash"),
    sa.column("task_id"),
    sa.column("round"),
    sa.column("state"),
    sa.column("payment_hash"),
)
_ROUND_USE = sa.select(
    _uses.c.checkout_hash, _uses.c.reference, _uses.c.open_mandate, _uses.c.payment_hash
).where(
    _uses.c.task_id == sa.bindparam("_task_id"),
    _uses.c.round == sa.bindparam("_round"),
    _uses.c.state.in_((UseState.RESERVED.value, UseState.CONFIRMED.value)),
)


def round_ap2(task_id: str, round_: int, payment_hash: str | None = None) -> Ap2Lookup:
    """The `Ledger.book_settlement` lookup of the AP2 references of round `round_` of `task_id`, when its
    mandates were presented with the payment `payment_hash` (the payment the round took) names."""

    async def lookup(connection: AsyncConnection) -> Ap2References | None:
        row = (await connection.execute(_ROUND_USE, {"_task_id": task_id, "_round": round_})).first()
        if row is None or not use_of_payment(row.payment_hash, payment_hash):
            return None
        return Ap2References(
            checkout_hash=row.checkout_hash, payment_ref=row.reference, open_mandate=row.open_mandate
        )

    return lookup


def ap2_event_data(references: Ap2References) -> dict[str, str]:
    """The `ap2` member of a settlement webhook event's `data`, in its wire form."""
    data = Ap2Data(
        checkout_hash=references.checkout_hash,
        payment_ref=references.payment_ref,
        open_mandate=references.open_mandate,
    )
    return data.model_dump(by_alias=True)
