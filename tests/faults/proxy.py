"""A JSON-RPC proxy on loopback, on a thread of its own, that can hold, lose or cut off requests to the node.

`tests.fixtures.faults.rpc_proxy` lives in the test's event loop and loses requests or answers. The fault
suite's merchants are separate processes that keep talking to the node while the test thread waits,
sleeps or makes blocking chain calls, and some kill points need a request *held*: neither answered nor
refused, so the merchant sits right there while it is SIGKILLed. So this proxy runs its own loop in a
daemon thread, and its rules are set from the test thread:

- `hold(match, deliver=...)`: matching requests wait (after reaching the node, with `deliver`) until
  `release(rule)` lets them through, or `discard(rule)` (or the proxy closing) drops them;
- `outage(match, seconds, deliver=...)`: the first matching request is lost (after reaching the node, with
  `deliver`) and the node is unreachable for `seconds`;
- `offline`: every connection is refused and every request in flight dropped.

Real sockets and bytes throughout: each client connection gets its own connection to the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tests.fixtures.faults import read_http_message

__all__ = ["ProxyRule", "ThreadedRpcProxy", "threaded_rpc_proxy"]

_STOP_TIMEOUT_S = 5.0


@dataclass
class ProxyRule:
    """What happens to requests whose body contains `match`; `reached` is set by the first one."""

    match: bytes
    kind: str  # "hold" or "outage"
    deliver: bool
    outage_s: float = 0.0
    hits: int = 0
    reached: threading.Event = field(default_factory=threading.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    discarded: bool = False


class ThreadedRpcProxy:
    """A running proxy to one node; point a merchant's `X402_RPC_URL` at `url`."""

    def __init__(self, node_url: str) -> None:
        target = urlsplit(node_url)
        if target.hostname is None or target.port is None:
            raise ValueError(f"not a host:port URL: {node_url}")
        self._node = (target.hostname, target.port)
        self.url = ""
        self.offline = False
        self._offline_until = 0.0
        self._rules: list[ProxyRule] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rpc-proxy", daemon=True)

    def hold(self, match: bytes, *, deliver: bool) -> ProxyRule:
        """Hold every request containing `match` (forwarded first with `deliver`) until `release(rule)`."""
        return self._add(ProxyRule(match, "hold", deliver))

    def outage(self, match: bytes, *, seconds: float, deliver: bool) -> ProxyRule:
        """Lose the first request containing `match` and refuse everything for `seconds` after it.

        With `deliver` the request reaches the node first and only its answer is lost.
        """
        return self._add(ProxyRule(match, "outage", deliver, outage_s=seconds))

    def release(self, rule: ProxyRule) -> None:
        """Let the requests `rule` holds (and every later one) through."""
        self._rules = [other for other in self._rules if other is not rule]
        self._loop.call_soon_threadsafe(rule.released.set)

    def discard(self, rule: ProxyRule) -> None:
        """Drop the requests `rule` holds, undelivered ones never reaching the node; later ones pass."""
        rule.discarded = True
        self.release(rule)

    @property
    def unreachable(self) -> bool:
        """Whether the node cannot be reached through the proxy right now."""
        return self.offline or time.monotonic() < self._offline_until

    def _add(self, rule: ProxyRule) -> ProxyRule:
        self._rules.append(rule)
        return rule

    def _rule_for(self, request: bytes) -> ProxyRule | None:
        for rule in self._rules:
            if rule.match in request and (rule.kind == "hold" or rule.hits == 0):
                rule.hits += 1
                rule.reached.set()
                return rule
        return None

    # -- the proxy's own thread -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread and the listening socket."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        self.url = future.result(_STOP_TIMEOUT_S)

    def stop(self) -> None:
        """Close the listening socket and every connection, then end the thread."""
        with contextlib.suppress(TimeoutError):
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(_STOP_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()

    async def _listen(self) -> str:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        node_writer: asyncio.StreamWriter | None = None
        try:
            if self.unreachable:
                return
            node_reader, node_writer = await asyncio.open_connection(*self._node)
            while True:
                try:
                    request = await read_http_message(client_reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                if self.unreachable:
                    return
                rule = self._rule_for(request)
                if rule is not None and rule.kind == "outage":
                    self._offline_until = time.monotonic() + rule.outage_s
                    if rule.deliver:
                        await _forward(node_writer, node_reader, request)
                    return
                if rule is not None and not rule.deliver:
                    await rule.released.wait()
                    if rule.discarded:
                        return
                response = await _forward(node_writer, node_reader, request)
                if rule is not None and rule.deliver:
                    await rule.released.wait()
                if self.unreachable or (rule is not None and rule.discarded):
                    return
                client_writer.write(response)
                await client_writer.drain()
        finally:
            if node_writer is not None:
                node_writer.close()
            client_writer.close()


async def _forward(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, request: bytes) -> bytes:
    writer.write(request)
    await writer.drain()
    return await read_http_message(reader)


@contextmanager
def threaded_rpc_proxy(node_url: str) -> Iterator[ThreadedRpcProxy]:
    """A `ThreadedRpcProxy` to `node_url` for the duration of the block."""
    proxy = ThreadedRpcProxy(node_url)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
