"""Signatures verify with the `standardwebhooks` library: per secret, over the exact bytes and id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from a2a_x402.merchant.webhooks import generate_secret, signature_header, webhook_headers

BODY = b'{"id":"evt_1","type":"settlement.completed","data":{"amount":"10"}}'


def test_headers_verify_and_carry_the_event_id() -> None:
    secret = generate_secret()
    now = datetime.now(UTC)

    headers = webhook_headers("evt_1", BODY, [secret], now=now)

    assert headers["webhook-id"] == "evt_1"
    assert headers["webhook-timestamp"] == str(int(now.timestamp()))
    assert headers["content-type"] == "application/json"
    assert Webhook(secret).verify(BODY, headers) == {
        "id": "evt_1",
        "type": "settlement.completed",
        "data": {"amount": "10"},
    }


def test_two_secrets_give_two_signatures_each_verifying_alone() -> None:
    old, new = generate_secret(), generate_secret()

    headers = webhook_headers("evt_1", BODY, [new, old], now=datetime.now(UTC))

    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(BODY, headers)
    Webhook(new).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(BODY, headers)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda headers, body: (headers, body.replace(b'"10"', b'"11"')),
        lambda headers, body: ({**headers, "webhook-id": "evt_2"}, body),
        lambda headers, body: (
            {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) + 1)},
            body,
        ),
    ],
    ids=["body", "id", "timestamp"],
)
def test_any_change_breaks_the_signature(tamper: object) -> None:
    secret = generate_secret()
    headers, body = tamper(webhook_headers("evt_1", BODY, [secret], now=datetime.now(UTC)), BODY)  # type: ignore[operator]

    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, headers)


def test_a_non_utc_timestamp_signs_the_same_instant() -> None:
    secret = generate_secret()
    now = datetime.now(UTC)

    local = signature_header("evt_1", now.astimezone(timezone(timedelta(hours=-5))), BODY, [secret])

    assert local == signature_header("evt_1", now, BODY, [secret])
