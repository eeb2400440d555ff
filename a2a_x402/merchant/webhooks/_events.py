"""Event types and their payloads: one pydantic model per type, the source of the committed JSON Schemas.

Every event body follows Standard Webhooks' shape, plus the event id and ledger sequence:

    {"id": "evt_…", "type": "settlement.completed", "timestamp": "…Z", "sequence": 42, "data": {…}}

`data` keys are camelCase; amounts are decimal strings of atomic units; times are ISO 8601 UTC. `sequence`
is the ledger sequence number of the fact (commit order, gap-free), the cursor of the replay endpoint.
`webhook.test` (sent by `webhooks test`) has no sequence: it is not stored.

`schemas/<type>.json` are generated from these models by `event_json_schema` and committed; a test keeps
them equal.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

from a2a_x402.merchant.ledger import BookedEntry, LedgerFact, SettlementBooked, SettlementFinalized
from a2a_x402.merchant.tenants import tenant_name

__all__ = [
    "EVENT_DATA_MODELS",
    "EVENT_MODELS",
    "Ap2Data",
    "EventModel",
    "EventType",
    "SettlementCompletedData",
    "SettlementFailedData",
    "SettlementFinalizedData",
    "SettlementPendingData",
    "SettlementReversedData",
    "WebhookTestData",
    "event_json_schema",
    "fact_event",
    "serialize_event",
]

_JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

Address = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{40}$")]
TxHash = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-f]{64}$")]
AtomicAmount = Annotated[str, StringConstraints(pattern=r"^(0|[1-9][0-9]{0,77})$")]
Network = Annotated[str, StringConstraints(pattern=r"^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$")]
# Written by name: the default tenant (id "") is `default`, as in the billing API's paths.
Tenant = Annotated[
    str,
    StringConstraints(max_length=64),
    PlainSerializer(tenant_name, return_type=str),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": 64,
            "title": "tenant",
            "description": "the tenant's name: `default` for the default tenant",
        },
        mode="serialization",
    ),
]
Text = Annotated[str, StringConstraints(min_length=1, max_length=255)]
EntryId = Annotated[str, StringConstraints(pattern=r"^je_[0-9a-f]{28}$")]
EventId = Annotated[str, StringConstraints(pattern=r"^evt_[0-9a-f]{28}$")]
BlockNumber = Annotated[int, Field(ge=0)]
Ap2Reference = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{43}$")]


class EventType(StrEnum):
    """Every event type the merchant sends."""

    SETTLEMENT_PENDING = "settlement.pending"
    SETTLEMENT_COMPLETED = "settlement.completed"
    SETTLEMENT_FAILED = "settlement.failed"
    SETTLEMENT_FINALIZED = "settlement.finalized"
    SETTLEMENT_REVERSED = "settlement.reversed"
    WEBHOOK_TEST = "webhook.test"


class EventModel(BaseModel):
    """Base of every event and event-data model: strict keys, immutable, camelCase on the wire."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        field_title_generator=lambda name, _info: to_camel(name),
    )


class Ap2Data(EventModel):
    """The AP2 mandates a payment was made with (specification §20), named by their hashes: never the
    mandates themselves, which are credentials and personal data."""

    checkout_hash: Ap2Reference = Field(
        description="base64url SHA-256 of the round's checkout JWT (the payment mandate's transaction_id)"
    )
    payment_ref: Ap2Reference = Field(
        description="the closed payment mandate's reference: the AP2 payment receipt's `reference`"
    )
    open_mandate: Ap2Reference = Field(
        description="the open payment mandate the payment counted against: the hash of its issuer-signed JWT"
    )


class _Payment(EventModel):
    tenant: Tenant
    task_id: Text
    context_id: Text
    payer: Address
    pay_to: Address
    asset: Address
    network: Network
    amount: AtomicAmount
    maximum: AtomicAmount | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="a metered (x402 upto) payment's maximum, the most the payer signed for; `amount` is "
        "what is settled (absent for a fixed price)",
    )
    ap2: Ap2Data | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="a payment made with AP2 mandates: their references (absent for a payment without)",
    )


class SettlementPendingData(_Payment):
    """`settlement.pending`: the payment is broadcast (or queued) and not yet confirmed."""

    transaction: TxHash | None = Field(description="the settlement transaction, once broadcast")
    occurred_at: AwareDatetime


class SettlementFailedData(_Payment):
    """`settlement.failed`: the payment could not be settled; nothing was booked."""

    transaction: TxHash | None = Field(description="the reverted transaction, if one was mined")
    reason: Text = Field(description="x402 error reason, e.g. insufficient_funds")
    occurred_at: AwareDatetime


class SettlementCompletedData(_Payment):
    """`settlement.completed`: the payment is on chain and booked as journal entry `ledgerEntryId`."""

    ledger_entry_id: EntryId
    transaction: TxHash
    block_number: BlockNumber
    settled_at: AwareDatetime
    booked_at: AwareDatetime


class SettlementFinalizedData(SettlementCompletedData):
    """`settlement.finalized`: the settlement reached its confirmation depth."""

    confirmations: int = Field(ge=1)
    finalized_at: AwareDatetime


class SettlementReversedData(SettlementCompletedData):
    """`settlement.reversed`: a reorg removed the settlement; entry `reversalEntryId` took it back."""

    reversal_entry_id: EntryId
    reason: Text
    reversed_at: AwareDatetime


class WebhookTestData(EventModel):
    """`webhook.test`: an operator checked the endpoint; nothing happened to any payment."""

    tenant: Tenant
    endpoint_id: Text
    message: Text


class _Envelope(EventModel):
    id: EventId
    type: str
    timestamp: AwareDatetime


class _LedgerEnvelope(_Envelope):
    sequence: int = Field(ge=1)


class SettlementPendingEvent(_LedgerEnvelope):
    type: Literal["settlement.pending"]
    data: SettlementPendingData


class SettlementCompletedEvent(_LedgerEnvelope):
    type: Literal["settlement.completed"]
    data: SettlementCompletedData


class SettlementFailedEvent(_LedgerEnvelope):
    type: Literal["settlement.failed"]
    data: SettlementFailedData


class SettlementFinalizedEvent(_LedgerEnvelope):
    type: Literal["settlement.finalized"]
    data: SettlementFinalizedData


class SettlementReversedEvent(_LedgerEnvelope):
    type: Literal["settlement.reversed"]
    data: SettlementReversedData


class WebhookTestEvent(_Envelope):
    type: Literal["webhook.test"]
    data: WebhookTestData


EVENT_DATA_MODELS: dict[EventType, type[EventModel]] = {
    EventType.SETTLEMENT_PENDING: SettlementPendingData,
    EventType.SETTLEMENT_COMPLETED: SettlementCompletedData,
    EventType.SETTLEMENT_FAILED: SettlementFailedData,
    EventType.SETTLEMENT_FINALIZED: SettlementFinalizedData,
    EventType.SETTLEMENT_REVERSED: SettlementReversedData,
    EventType.WEBHOOK_TEST: WebhookTestData,
}
"""The model of each event type's `data` object."""

EVENT_MODELS: dict[EventType, type[_Envelope]] = {
    EventType.SETTLEMENT_PENDING: SettlementPendingEvent,
    EventType.SETTLEMENT_COMPLETED: SettlementCompletedEvent,
    EventType.SETTLEMENT_FAILED: SettlementFailedEvent,
    EventType.SETTLEMENT_FINALIZED: SettlementFinalizedEvent,
    EventType.SETTLEMENT_REVERSED: SettlementReversedEvent,
    EventType.WEBHOOK_TEST: WebhookTestEvent,
}
"""The envelope model of each event type."""


def event_json_schema(event_type: EventType) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a whole `event_type` body, as committed under `schemas/`."""
    schema = EVENT_MODELS[event_type].model_json_schema(by_alias=True, mode="serialization")
    schema["title"] = event_type.value
    return {"$schema": _JSON_SCHEMA_DIALECT, "$id": f"{event_type.value}.json", **schema}


def serialize_event(
    event_type: EventType, *, event_id: str, timestamp: datetime, sequence: int | None, data: EventModel
) -> bytes:
    """The event body, serialized once: compact JSON in model field order, validated against its model."""
    fields: dict[str, Any] = {"id": event_id, "type": event_type.value, "timestamp": timestamp, "data": data}
    if sequence is not None:
        fields["sequence"] = sequence
    envelope = EVENT_MODELS[event_type].model_validate(fields)
    return envelope.model_dump_json(by_alias=True).encode()


def fact_event(fact: LedgerFact) -> tuple[EventType, EventModel]:
    """The event type and data announcing a ledger fact."""
    if isinstance(fact, SettlementBooked):
        return EventType.SETTLEMENT_COMPLETED, SettlementCompletedData(**_completed(fact.entry))
    if isinstance(fact, SettlementFinalized):
        data = SettlementFinalizedData(
            **_completed(fact.entry),
            confirmations=fact.finalization.confirmations,
            finalized_at=fact.finalization.finalized_at,
        )
        return EventType.SETTLEMENT_FINALIZED, data
    reversed_data = SettlementReversedData(
        **_completed(fact.original),
        reversal_entry_id=fact.reversal.id,
        reason=fact.reversal.reason or "",  # always set on a reversal (a CHECK); "" would fail validation
        reversed_at=fact.reversal.effective_at,
    )
    return EventType.SETTLEMENT_REVERSED, reversed_data


def _completed(entry: BookedEntry) -> dict[str, Any]:
    return {
        "tenant": entry.tenant,
        "task_id": entry.task_id,
        "context_id": entry.context_id,
        "payer": entry.payer,
        "pay_to": entry.pay_to,
        "asset": entry.asset,
        "network": entry.network,
        "amount": str(entry.amount),
        "maximum": None if entry.maximum is None else str(entry.maximum),
        "ledger_entry_id": entry.id,
        "transaction": entry.tx_hash,
        "block_number": entry.block_number,
        "settled_at": entry.effective_at,
        "booked_at": entry.booked_at,
        "ap2": _ap2(entry),
    }


def _ap2(entry: BookedEntry) -> Ap2Data | None:
    references = entry.ap2
    if references is None:
        return None
    return Ap2Data(
        checkout_hash=references.checkout_hash,
        payment_ref=references.payment_ref,
        open_mandate=references.open_mandate,
    )
