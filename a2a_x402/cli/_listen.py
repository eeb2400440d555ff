"""The listening socket of a `serve` command, bound before anything starts.

A server that binds its port only after its startup logs that it serves, then fails on a busy port with
a traceback-like error and its own exit status. Binding first makes a busy or forbidden address one line
and exit status 2 like every other mistake, before the database is migrated or a connection opened.
"""

from __future__ import annotations

import errno
import socket

from ._errors import ConfigError

__all__ = ["bind_listener", "check_listenable"]

_HOST_SETTING = "X402_HOST / --host"
_PORT_SETTING = "X402_PORT / --port"


def bind_listener(host: str, port: int, *, port_setting: str = _PORT_SETTING) -> socket.socket:
    """A TCP socket bound to `host`:`port` (not yet listening), for the server to listen on.

    `port_setting` names the setting the port comes from, for the refusal's line (`X402_PORT / --port`).

    Raises:
        ConfigError: the address is in use, not this machine's, or not allowed (one line naming it).
    """
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    settings = f"{_HOST_SETTING}, {port_setting}"
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        # A name with both families (`localhost`) gets IPv4, as uvicorn's own binding does: the URLs the
        # services print and their clients dial say 127.0.0.1, whatever order the resolver prefers.
        family, kind, proto, _name, sockaddr = min(found, key=lambda info: info[0] != socket.AF_INET)
    except socket.gaierror as exc:
        raise ConfigError(f"not starting: cannot listen on {address}: {exc.strerror} ({settings})") from exc
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn does: a restarted server may take its port while old connections linger in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"not starting: {address} is already in use ({port_setting})") from exc
        raise ConfigError(f"not starting: cannot listen on {address}: {exc.strerror} ({settings})") from exc
    sock.set_inheritable(True)
    return sock


def check_listenable(host: str, port: int, *, port_setting: str) -> None:
    """Refuse, as `bind_listener` does, an address a server binding its own socket (gRPC) could not bind.

    The address is bound and released at once: the server binds it a moment later, so a process taking the
    port in between still fails the server's startup, which `cli.Server` answers in one line too.

    Raises:
        ConfigError: the address is in use, not this machine's, or not allowed (one line naming it).
    """
    bind_listener(host, port, port_setting=port_setting).close()
