"""One signed POST: what the receiver answered, `Retry-After` in both forms, and failures as results."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from merchant.webhooks._sender import send_signed
from tests.fixtures.servers import base_url_of, bind_loopback

from .conftest import SECRET
from .receiver import HOOK_PATH, Receiver, Reply

BODY = b'{"id":"evt_1"}'


@pytest.mark.parametrize(
    ("reply", "retry_after_s"),
    [
        (Reply(429, {"retry-after": "7"}), 7.0),
        (
            Reply(
                503, {"retry-after": format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)}
            ),
            30.0,
        ),
        (Reply(429, {"retry-after": "soon"}), None),
        (Reply(500, {"retry-after": "7"}), None),  # only 429 and 503 are throttling answers
    ],
)
async def test_retry_after_in_seconds_or_as_a_date(
    asgi_server: Callable[..., str], reply: Reply, retry_after_s: float | None
) -> None:
    receiver = Receiver([SECRET], plan=[reply])
    url = asgi_server(receiver.app) + HOOK_PATH

    async with httpx.AsyncClient() as client:
        result = await send_signed(client, url, "evt_1", BODY, [SECRET], allow_private=True, timeout_s=2)

    assert result.status_code == reply.status and result.error is None
    if retry_after_s is None:
        assert result.retry_after_s is None
    else:
        assert result.retry_after_s == pytest.approx(retry_after_s, abs=2)
    [request] = receiver.received
    assert request.verified and request.body == BODY


async def test_a_refused_connection_is_a_result_not_an_exception() -> None:
    closed = bind_loopback()
    url = base_url_of(closed) + HOOK_PATH
    closed.close()  # nothing listens there any more

    async with httpx.AsyncClient() as client:
        result = await send_signed(client, url, "evt_1", BODY, [SECRET], allow_private=True, timeout_s=2)

    assert result.status_code is None and result.retry_after_s is None
    assert result.error is not None and result.error.startswith("ConnectError")
