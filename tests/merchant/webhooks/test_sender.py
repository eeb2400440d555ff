"""One signed POST: what the receiver answered, `Retry-After` in both forms, and failures as results."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from a2a_x402.merchant.webhooks._sender import send_signed
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import base_url_of, bind_loopback

from .conftest import SECRET
from .receiver import HOOK_PATH, Receiver, Reply

BODY = b'{"id":"evt_1"}'


def _in_30_s() -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)


@pytest.mark.parametrize(
    ("status", "retry_after", "retry_after_s"),
    [
        (429, lambda: "7", 7.0),
        (503, _in_30_s, 30.0),  # an HTTP date
        (429, lambda: "soon", None),
        (500, lambda: "7", None),  # only 429 and 503 are throttling answers
    ],
)
async def test_retry_after_in_seconds_or_as_a_date(
    asgi_server: Callable[..., str], status: int, retry_after: Callable[[], str], retry_after_s: float | None
) -> None:
    receiver = Receiver([SECRET], plan=[Reply(status, {"retry-after": retry_after()})])
    url = asgi_server(receiver.app) + HOOK_PATH

    async with httpx.AsyncClient(timeout=HANG_S) as client:
        result = await send_signed(client, url, "evt_1", BODY, [SECRET], allow_private=True, timeout_s=2)

    assert result.status_code == status and result.error is None
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

    async with httpx.AsyncClient(timeout=HANG_S) as client:
        result = await send_signed(client, url, "evt_1", BODY, [SECRET], allow_private=True, timeout_s=2)

    assert result.status_code is None and result.retry_after_s is None
    assert result.error is not None and result.error == "no answer: connection refused"
