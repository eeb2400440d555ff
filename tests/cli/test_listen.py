"""`cli.bind_listener`: the address it binds, and a busy port refused in one line."""

from __future__ import annotations

import socket

import pytest

from cli import ConfigError, bind_listener


def test_a_name_resolving_to_both_families_binds_ipv4(monkeypatch: pytest.MonkeyPatch) -> None:
    # This machine's resolver gives `localhost` one family only; a resolver that lists ::1 first is stood in.
    real = socket.getaddrinfo

    def v6_first(host: str, port: int, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        v6 = (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0))
        return [v6, *real("127.0.0.1", port, *args, **kwargs)]  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", v6_first)
    sock = bind_listener("localhost", 0)
    try:
        assert sock.family == socket.AF_INET
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


def test_a_busy_port_is_refused_in_one_line() -> None:
    taken = bind_listener("127.0.0.1", 0)
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ConfigError) as refused:
            bind_listener("127.0.0.1", port)
        assert str(refused.value) == f"not starting: 127.0.0.1:{port} is already in use (X402_PORT / --port)"
    finally:
        taken.close()
