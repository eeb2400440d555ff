"""Standard Webhooks signatures over the stored body, one `v1,` signature per active secret."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks import Webhook

__all__ = ["signature_header", "webhook_headers"]


def signature_header(msg_id: str, timestamp: datetime, body: bytes, secrets: Sequence[str]) -> str:
    """The `webhook-signature` value: `v1,<base64 HMAC-SHA256>` per secret, space-separated.

    Signs `msg_id.timestamp.body` with the `standardwebhooks` library. `timestamp` must be aware: the
    library reads its fields as UTC, so it is converted to UTC first.
    """
    moment = timestamp.astimezone(UTC)
    text = body.decode()
    return " ".join(Webhook(secret).sign(msg_id, moment, text) for secret in secrets)


def webhook_headers(msg_id: str, body: bytes, secrets: Sequence[str], *, now: datetime) -> dict[str, str]:
    """The headers of one attempt: the same `webhook-id` on every retry, this attempt's timestamp and
    signatures."""
    moment = now.astimezone(UTC)
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": signature_header(msg_id, moment, body, secrets),
    }
