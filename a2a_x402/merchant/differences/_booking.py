"""Booking a payment no offer explains to a tenant, on an operator's word."""

from __future__ import annotations

from datetime import UTC, datetime

from a2a_x402.merchant.ledger import BookedEntry, Ledger, LedgerError, SettlementBooking
from a2a_x402.merchant.tenants import tenant_name

from ._kinds import BOOKABLE_KINDS
from ._store import MAX_NOTE_CHARS, DifferenceNotOpenError, DifferenceState, DifferenceStore

__all__ = ["DifferenceRefusedError", "acknowledge_difference", "book_difference", "checked_note"]


class DifferenceRefusedError(Exception):
    """An operator's change of a difference is refused (the message says why, in one line)."""


def checked_note(note: str) -> str:
    """`note` stripped; a blank or overlong note is refused (one line, nothing changed)."""
    text = " ".join(note.split())
    if not text:
        raise DifferenceRefusedError("a note is required: say why")
    if len(text) > MAX_NOTE_CHARS:
        raise DifferenceRefusedError(f"the note is longer than {MAX_NOTE_CHARS} characters")
    return text


async def book_difference(
    store: DifferenceStore,
    ledger: Ledger,
    ident: int,
    *,
    tenant: str,
    tenant_pay_to: str,
    network: str,
    note: str,
    by: str,
) -> BookedEntry:
    """Book the payment of open difference `ident` to `tenant` (whose payTo is `tenant_pay_to`) and close
    it as booked. Only a transfer to that payTo that no offer explains and the ledger lacks is bookable.

    Raises:
        DifferenceRefusedError: not bookable to this tenant, or a bad note; nothing changed.
        DifferenceNotOpenError: no such open difference.
    """
    text = checked_note(note)
    difference = await store.get(ident)
    if difference is None or difference.state is not DifferenceState.OPEN:
        raise DifferenceNotOpenError(f"difference {ident}: no such open difference")
    concerns = difference.tenant == tenant or (
        difference.tenant is None and difference.pay_to == tenant_pay_to
    )
    if not concerns:  # another tenant's is answered as unknown: its existence is not this tenant's to learn
        raise DifferenceNotOpenError(
            f"difference {ident}: no such open difference for tenant {tenant_name(tenant)}"
        )
    if difference.kind not in BOOKABLE_KINDS:
        raise DifferenceRefusedError(
            f"difference {ident} is {difference.kind}: only a payment no offer explains can be booked"
        )
    facts = difference.facts
    if difference.pay_to != tenant_pay_to or facts.get("pay_to") != tenant_pay_to:
        raise DifferenceRefusedError(
            f"difference {ident} is not a payment to tenant {tenant_name(tenant)}'s payTo"
        )
    chain_id, asset = int(facts["chain_id"]), str(facts["asset"])
    if await ledger.has_authorization(chain_id, asset, facts["payer"], facts["nonce"]):
        raise DifferenceRefusedError(f"difference {ident}: the payment is in the ledger already")
    reference = f"difference-{ident}"
    try:
        entry = await ledger.book_settlement(
            SettlementBooking(
                tenant=tenant,
                task_id=reference,
                context_id=reference,
                payer=facts["payer"],
                pay_to=facts["pay_to"],
                asset=asset,
                network=network,
                chain_id=chain_id,
                amount=int(facts["amount"]),
                nonce=facts["nonce"],
                tx_hash=facts["tx_hash"],
                block_number=int(facts["block_number"]),
                settled_at=datetime.now(UTC),
            )
        )
    except LedgerError as exc:
        raise DifferenceRefusedError(f"difference {ident} cannot be booked: {exc}") from exc
    await store.close(ident, DifferenceState.BOOKED, note=f"{text} (booked as {entry.id})", by=by)
    return entry


async def acknowledge_difference(
    store: DifferenceStore,
    ident: int,
    *,
    note: str,
    by: str,
    tenant_or_payee: tuple[str, str] | None = None,
) -> None:
    """Close open difference `ident` as acknowledged with `note` (limited to `tenant_or_payee`'s).

    Raises:
        DifferenceRefusedError: a blank or overlong note; nothing changed.
        DifferenceNotOpenError: no such open difference.
    """
    text = checked_note(note)
    await store.close(ident, DifferenceState.ACKNOWLEDGED, note=text, by=by, tenant_or_payee=tenant_or_payee)
