"""One signed POST of a stored body: the SSRF check, the Standard Webhooks headers, the outcome.

Never raises for anything the receiver or the network does: timeouts, connection errors and refused targets
come back as a `SendResult` with an `error`, so the caller records every attempt the same way.

`timeout_s` bounds the whole attempt, DNS lookup included: httpx's own timeouts are per step (each read),
so a receiver trickling its answer a byte at a time would otherwise keep an attempt open indefinitely,
past the claim lease that stops another worker from sending the same delivery.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from a2a_x402.observability import unreachable_reason

from ._errors import UnsafeTargetError
from ._signing import webhook_headers
from ._ssrf import resolve_target

__all__ = ["REQUEST_TIMEOUT_S", "SendResult", "send_signed"]

REQUEST_TIMEOUT_S = 15.0
"""Deadline of one delivery attempt, from DNS lookup to response headers."""

_ERROR_MAX = 255
_THROTTLE_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class SendResult:
    """What came of one POST: the status (None if no answer), an error, `Retry-After` on 429/503, timing."""

    status_code: int | None
    error: str | None
    retry_after_s: float | None
    latency_ms: int


def _retry_after_s(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


async def send_signed(
    client: httpx.AsyncClient,
    url: str,
    msg_id: str,
    payload: bytes,
    secrets: Sequence[str],
    *,
    allow_private: bool,
    timeout_s: float,
) -> SendResult:
    """POST `payload` to `url` (checked and pinned by the SSRF guard) as message `msg_id`, signed with
    every one of `secrets`, all within `timeout_s`; no redirects are followed and the response body is
    never read."""
    started = time.monotonic()
    status_code: int | None = None
    error: str | None = None
    retry_after: float | None = None
    try:
        async with asyncio.timeout(timeout_s):
            target = await resolve_target(url, allow_private=allow_private)
            signed = webhook_headers(msg_id, payload, secrets, now=datetime.now(UTC))
            headers = {"host": target.host, **signed}
            # TLS is negotiated for the original host name although the connection goes to the checked IP.
            extensions = {} if target.sni_hostname is None else {"sni_hostname": target.sni_hostname}
            request = client.build_request(
                "POST", target.url, content=payload, headers=headers, timeout=timeout_s, extensions=extensions
            )
            # stream=True and no read: a receiver cannot make the worker hold a large response body.
            response = await client.send(request, stream=True, follow_redirects=False)
            await response.aclose()
        status_code = response.status_code
        if status_code in _THROTTLE_STATUSES:
            retry_after = _retry_after_s(response)
    except UnsafeTargetError as exc:
        error = f"{exc.code}: {exc}"
    except (TimeoutError, httpx.TimeoutException):
        error = f"timeout after {timeout_s:g} s"
    except httpx.TransportError as exc:  # in words for the operator, never an exception's name
        error = f"no answer: {unreachable_reason(exc)}"
    except httpx.HTTPError as exc:
        error = f"no usable answer: {exc}"
    latency_ms = round((time.monotonic() - started) * 1000)
    return SendResult(status_code, None if error is None else error[:_ERROR_MAX], retry_after, latency_ms)
