"""The gRPC server's own bounds on what one connection may hold, from the request limits.

gRPC bounds neither how many calls a connection may open at once, nor how long an idle connection, or a
connection at all, stays open, nor how long a client may take to start HTTP/2 on a new connection: a client
could open streams without end, or keep connections open for ever, holding memory and file descriptors.
Here:

- a connection carries at most `grpc_max_concurrent_streams` calls at once (HTTP/2's
  SETTINGS_MAX_CONCURRENT_STREAMS: a client's further calls wait for one to end, a client ignoring the
  setting has its streams refused);
- a connection with no call open for `grpc_max_connection_idle_s` is closed (GOAWAY);
- every connection is asked to close (GOAWAY) after `grpc_max_connection_age_s`, and closed
  `grpc_max_connection_age_grace_s` later with whatever calls it still holds, so nothing (a subscription, a
  message half sent) holds one for ever; clients open a new one (±10% jitter: not all at once);
- HTTP/2 must be under way within `header_timeout_s` of the TCP connection (the handshake deadline);
- the server pings a connection quiet for `_KEEPALIVE_S` and closes it when the ping is not answered within
  `_KEEPALIVE_TIMEOUT_S` (a peer gone without a FIN holds nothing), and closes a connection whose client pings
  more often than every `_MIN_CLIENT_PING_INTERVAL_S` without data, twice (a ping flood).

The request message itself must arrive within `body_timeout_s` of the call's start (`_grpc`).
"""

from __future__ import annotations

from ._limits import RequestLimits

__all__ = ["server_options"]

_KEEPALIVE_S = 120.0
_KEEPALIVE_TIMEOUT_S = 20.0
_MIN_CLIENT_PING_INTERVAL_S = 60.0
# Pings a client may send too often before its connection is closed (gRPC's own default, said here).
_MAX_PING_STRIKES = 2


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def server_options(limits: RequestLimits) -> tuple[tuple[str, int], ...]:
    """The `grpc.aio.server` options bounding messages, metadata and connections by `limits` (see the
    module); a larger message is RESOURCE_EXHAUSTED before it is read into memory, larger metadata (the gRPC
    headers) is refused by the transport."""
    return (
        # One merchant per port: grpc's default SO_REUSEPORT would let a second process bind the same port and
        # take half of its calls, where an HTTP server would refuse to start.
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", limits.max_body_bytes),
        ("grpc.max_metadata_size", limits.max_header_bytes),
        ("grpc.absolute_max_metadata_size", limits.max_header_bytes),
        ("grpc.max_concurrent_streams", limits.grpc_max_concurrent_streams),
        ("grpc.max_connection_idle_ms", _ms(limits.grpc_max_connection_idle_s)),
        ("grpc.max_connection_age_ms", _ms(limits.grpc_max_connection_age_s)),
        ("grpc.max_connection_age_grace_ms", _ms(limits.grpc_max_connection_age_grace_s)),
        ("grpc.server_handshake_timeout_ms", _ms(limits.header_timeout_s)),
        ("grpc.keepalive_time_ms", _ms(_KEEPALIVE_S)),
        ("grpc.keepalive_timeout_ms", _ms(_KEEPALIVE_TIMEOUT_S)),
        # Keep-alive pings go on however long a call sends nothing (a subscription waiting for events).
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", _ms(_MIN_CLIENT_PING_INTERVAL_S)),
        ("grpc.http2.max_ping_strikes", _MAX_PING_STRIKES),
    )
