"""A real webhook receiver for tests: verifies every request with the `standardwebhooks` library.

It answers from a script (`plan`: one `Reply` per request, then 200), records every request with which of
its secrets verified it, can hold requests open (`holding`, until `released` is set), notes when two
requests for one `webhook-id` were ever in flight at once and how many requests ever were (`peak`).
`trickling_receiver` is a raw socket server that sends its response headers one byte at a time.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures.servers import base_url_of, bind_loopback

HOOK_PATH = "/hook"


@dataclass(frozen=True)
class Reply:
    """What to answer to one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it."""

    webhook_id: str
    timestamp: str
    signature: str
    body: bytes
    verified_with: tuple[bool, ...]
    answered: int
    at: float

    @property
    def verified(self) -> bool:
        """Whether at least one of the receiver's secrets verified the request."""
        return any(self.verified_with)


class Receiver:
    """The receiver's state and its Starlette app (`app`), served with `serve_asgi`."""

    def __init__(self, secrets: Sequence[str], plan: Sequence[Reply] = (), *, delay_s: float = 0.0) -> None:
        self.secrets = list(secrets)
        self.plan = list(plan)
        self.delay_s = delay_s
        self.received: list[Received] = []
        self.overlaps: list[str] = []
        self.peak = 0
        self.holding = False
        self.released = threading.Event()
        self.arrived = threading.Event()
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()
        self.app = Starlette(routes=[Route(HOOK_PATH, self._handle, methods=["POST"])])

    def ids(self) -> set[str]:
        """Every `webhook-id` received so far."""
        return {request.webhook_id for request in self.received}

    def _verify(self, body: bytes, headers: dict[str, str]) -> tuple[bool, ...]:
        results = []
        for secret in self.secrets:
            try:
                Webhook(secret).verify(body, headers)
                results.append(True)
            except WebhookVerificationError:
                results.append(False)
        return tuple(results)

    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        webhook_id = headers.get("webhook-id", "")
        with self._lock:
            if webhook_id in self._in_flight:
                self.overlaps.append(webhook_id)
            self._in_flight.add(webhook_id)
            self.peak = max(self.peak, len(self._in_flight))
            reply = self.plan.pop(0) if self.plan else Reply(delay_s=self.delay_s)
        try:
            self.arrived.set()
            if self.holding:
                await asyncio.to_thread(self.released.wait, 30)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            verified = self._verify(body, headers)
            status = reply.status if any(verified) else 401
            self.received.append(
                Received(
                    webhook_id=webhook_id,
                    timestamp=headers.get("webhook-timestamp", ""),
                    signature=headers.get("webhook-signature", ""),
                    body=body,
                    verified_with=verified,
                    answered=status,
                    at=time.monotonic(),
                )
            )
            return Response(status_code=status, headers=reply.headers)
        finally:
            with self._lock:
                self._in_flight.discard(webhook_id)


TRICKLED_RESPONSE = b"HTTP/1.1 200 OK\r\nx-padding: " + b"." * 200 + b"\r\ncontent-length: 0\r\n\r\n"


@dataclass
class Trickle:
    """A trickling receiver: its base URL, and how many bytes of the answer it has sent so far."""

    base_url: str
    sent: int = 0

    @property
    def finished(self) -> bool:
        """Whether the whole answer has been sent: a sender that waited for it was not cut off."""
        return self.sent >= len(TRICKLED_RESPONSE)


@contextmanager
def trickling_receiver(byte_interval_s: float = 0.05) -> Iterator[Trickle]:
    """Serve on 127.0.0.1 a receiver that answers 200 with headers sent one byte every `byte_interval_s`
    (about 12 s for the whole answer with the default), so no single read ever waits long; yields its
    `Trickle`, whose `sent` counts the bytes sent to the connection being answered."""
    sock = bind_loopback()
    sock.listen()
    sock.settimeout(0.05)
    stop = threading.Event()
    trickle_state = Trickle(base_url_of(sock))

    def trickle(connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            for index in range(len(TRICKLED_RESPONSE)):
                if stop.wait(byte_interval_s):
                    return
                try:
                    connection.sendall(TRICKLED_RESPONSE[index : index + 1])
                except OSError:  # the sender gave up
                    return
                trickle_state.sent = index + 1

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _address = sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=trickle, args=(connection,), daemon=True).start()

    acceptor = threading.Thread(target=accept, name="trickling-receiver", daemon=True)
    acceptor.start()
    try:
        yield trickle_state
    finally:
        stop.set()
        acceptor.join(5)
        sock.close()
