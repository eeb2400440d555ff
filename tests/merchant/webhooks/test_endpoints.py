"""Endpoints: seeded from the tenant config with their event types, secrets validated and rotated,
disabled and enabled."""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime, timedelta

import pytest

from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import (
    EndpointConfig,
    EndpointNotFoundError,
    InvalidEventError,
    InvalidWebhookSecretError,
    Outbox,
    WebhookEndpoints,
    generate_secret,
    validate_secret,
)
from tests.merchant.ledger.bookings import booking

from .conftest import SQLITE_ONLY

A = "https://acme.example/hook"
B = "https://acme.example/other"
MALFORMED = "whsec_short"


def test_generated_secrets_are_valid_standard_webhooks_secrets() -> None:
    secret = generate_secret()

    assert validate_secret(secret) == secret
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert generate_secret() != secret


@pytest.mark.parametrize(
    "secret",
    [
        "plain-secret-without-prefix",
        "whsec_not*base64!",
        "whsec_" + base64.b64encode(b"x" * 16).decode(),
        "whsec_",
    ],
)
def test_malformed_secrets_are_refused_without_echoing_them(secret: str) -> None:
    with pytest.raises(InvalidWebhookSecretError) as raised:
        validate_secret(secret)
    key = secret.removeprefix("whsec_")
    assert not key or key not in str(raised.value)


async def test_sync_creates_disables_and_restores_endpoints(
    endpoints: WebhookEndpoints, caplog: pytest.LogCaptureFixture
) -> None:
    secret = generate_secret()
    created = await endpoints.sync([EndpointConfig("acme", A, secret), EndpointConfig("globex", B, secret)])
    again = await endpoints.sync([EndpointConfig("acme", A, secret), EndpointConfig("globex", B, secret)])

    assert again == created and [endpoint.status for endpoint in created] == ["active", "active"]
    assert created[0].event_types == () and created[0].subscribes("settlement.failed")

    [acme, globex] = await endpoints.sync([EndpointConfig("acme", A, secret)])  # globex's URL was removed
    assert (acme.status, globex.status, globex.disabled_reason) == ("active", "disabled", "not_configured")

    with caplog.at_level(logging.WARNING):
        restored = await endpoints.sync(
            [EndpointConfig("acme", A, generate_secret()), EndpointConfig("globex", B, secret)]
        )
    assert [endpoint.status for endpoint in restored] == ["active", "active"]
    assert restored[0].secret == secret  # the stored secret wins; the operator rotates explicitly
    assert "configured secret differs" in caplog.text and secret not in caplog.text


@SQLITE_ONLY
async def test_sync_validates_before_writing(endpoints: WebhookEndpoints) -> None:
    with pytest.raises(InvalidWebhookSecretError):
        await endpoints.sync(
            [EndpointConfig("acme", A, generate_secret()), EndpointConfig("acme", B, "whsec_x")]
        )
    with pytest.raises(InvalidEventError):
        await endpoints.sync([EndpointConfig("acme", A, generate_secret(), ("payment.done",))])
    assert await endpoints.list() == []


async def test_sync_updates_the_event_types_of_an_existing_endpoint(
    endpoints: WebhookEndpoints, outbox: Outbox, ledger: Ledger
) -> None:
    secret = generate_secret()
    [everything] = await endpoints.sync([EndpointConfig("acme", A, secret)])
    [narrowed] = await endpoints.sync([EndpointConfig("acme", A, secret, ("settlement.reversed",))])
    await ledger.book_settlement(booking())  # a settlement.completed event

    assert narrowed.id == everything.id and everything.event_types == ()
    assert narrowed.event_types == ("settlement.reversed",) and narrowed.updated_at >= everything.updated_at
    assert await outbox.deliveries("acme") == []  # not subscribed to settlement.completed any more

    [widened] = await endpoints.sync([EndpointConfig("acme", A, secret)])
    await ledger.book_settlement(booking())
    assert widened.event_types == ()
    assert [delivery.event_type for delivery in await outbox.deliveries("acme")] == ["settlement.completed"]


async def test_rotation_keeps_the_previous_secret_signing_for_the_overlap(
    endpoints: WebhookEndpoints,
) -> None:
    old = generate_secret()
    [endpoint] = await endpoints.sync([EndpointConfig("acme", A, old)])

    rotated = await endpoints.rotate_secret(endpoint.id, overlap=timedelta(hours=2))

    now = datetime.now(UTC)
    assert rotated.secret != old and rotated.previous_secret == old
    assert rotated.signing_secrets(now) == (rotated.secret, old)
    assert rotated.signing_secrets(now + timedelta(hours=2, seconds=1)) == (rotated.secret,)
    assert old not in repr(rotated) and rotated.secret not in repr(rotated)
    with pytest.raises(InvalidWebhookSecretError):
        await endpoints.rotate_secret(endpoint.id, new_secret=MALFORMED)
    with pytest.raises(EndpointNotFoundError):
        await endpoints.rotate_secret("we_missing")


async def test_resolve_finds_a_tenants_endpoint(endpoints: WebhookEndpoints) -> None:
    secret = generate_secret()
    await endpoints.sync([EndpointConfig("acme", A, secret), EndpointConfig("acme", B, secret)])
    [first, second] = await endpoints.list("acme")

    assert await endpoints.resolve("acme", second.id) == second
    with pytest.raises(EndpointNotFoundError, match="has 2 endpoints"):
        await endpoints.resolve("acme")
    with pytest.raises(EndpointNotFoundError):
        await endpoints.resolve("globex", first.id)  # another tenant's endpoint is not found
    with pytest.raises(EndpointNotFoundError, match=r"^tenant 'default' has 0 endpoints; name one"):
        await endpoints.resolve("")  # the default tenant by its name, never ''
    with pytest.raises(EndpointNotFoundError):
        await endpoints.enable("we_missing")
