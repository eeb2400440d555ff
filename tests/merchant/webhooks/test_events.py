"""The committed JSON Schemas: generated from the models, and real events of every type validate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import (
    EndpointConfig,
    EventType,
    Outbox,
    WebhookEndpoints,
    event_json_schema,
    send_test_event,
)
from tests.fixtures.deadlines import HANG_S
from tests.merchant.ledger.bookings import booking

from .conftest import SECRET, SQLITE_ONLY
from .receiver import HOOK_PATH, Receiver
from .test_outbox import FAILED_DATA

SCHEMAS = Path(__file__).resolve().parents[3] / "a2a_x402" / "merchant" / "webhooks" / "schemas"


def _validator(event_type: str) -> Any:
    schema = json.loads((SCHEMAS / f"{event_type}.json").read_text())
    return jsonschema_rs.validator_for(schema, validate_formats=True)


@pytest.mark.parametrize("event_type", list(EventType))
def test_committed_schema_is_the_generated_one(event_type: EventType) -> None:
    committed = json.loads((SCHEMAS / f"{event_type.value}.json").read_text())
    assert committed == event_json_schema(event_type)
    assert committed["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_there_is_one_schema_per_event_type() -> None:
    assert sorted(path.stem for path in SCHEMAS.glob("*.json")) == sorted(
        event_type.value for event_type in EventType
    )


async def test_real_events_of_every_ledger_and_payment_type_validate(
    ledger: Ledger, outbox: Outbox, engine: AsyncEngine
) -> None:
    entry = await ledger.book_settlement(booking(amount=2**200))
    await ledger.mark_final(entry.id, confirmations=6)
    await ledger.reverse_settlement(entry.id, reason="reorg")
    pending = {key: value for key, value in FAILED_DATA.items() if key != "reason"}
    async with engine.begin() as connection:
        await outbox.record_event(connection, "acme", "settlement.pending", pending)
        await outbox.record_event(connection, "acme", "settlement.failed", FAILED_DATA)

    events = await outbox.events_since("acme")

    assert {event.type for event in events} == {event_type.value for event_type in EventType} - {
        "webhook.test"
    }
    for event in events:
        body = json.loads(event.payload)
        validator = _validator(event.type)
        assert validator.is_valid(body), list(validator.iter_errors(body))
        # The schemas are not vacuous: the same body with a number for an amount, or an extra key, fails.
        assert not validator.is_valid({**body, "data": {**body["data"], "amount": 1}})
        assert not validator.is_valid({**body, "extra": True})
        assert not _validator(
            "settlement.completed" if event.type != "settlement.completed" else "settlement.failed"
        ).is_valid(body)


@SQLITE_ONLY
async def test_the_test_event_validates(
    endpoints: WebhookEndpoints, engine: AsyncEngine, asgi_server: Any
) -> None:
    receiver = Receiver([SECRET])
    await endpoints.sync([EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)])
    async with httpx.AsyncClient(timeout=HANG_S) as client:
        [result] = await send_test_event(engine, client, "acme", allow_private_targets=True)

    [request] = receiver.received
    body = json.loads(request.body)
    assert result.ok and request.verified and body["type"] == "webhook.test" and "sequence" not in body
    assert _validator("webhook.test").is_valid(body)
