"""`cli.bind_listener` and `cli.check_listenable`: the address bound, and a busy port refused in one line
naming the setting it comes from."""

from __future__ import annotations

import socket

import pytest

from a2a_x402.cli import ConfigError, bind_listener, check_listenable


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


def test_a_busy_port_of_another_setting_is_refused_naming_that_setting() -> None:
    taken = bind_listener("127.0.0.1", 0)
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ConfigError) as refused:
            check_listenable("127.0.0.1", port, port_setting="X402_GRPC_PORT / --grpc-port")
        assert str(refused.value) == (
            f"not starting: 127.0.0.1:{port} is already in use (X402_GRPC_PORT / --grpc-port)"
        )
    finally:
        taken.close()


def test_a_free_port_is_left_free_for_the_server_that_binds_it() -> None:
    probe = bind_listener("127.0.0.1", 0)
    port = probe.getsockname()[1]
    probe.close()

    check_listenable("127.0.0.1", port, port_setting="X402_GRPC_PORT / --grpc-port")

    with socket.socket() as server:  # no SO_REUSEADDR: nothing of the check still holds the port
        server.bind(("127.0.0.1", port))
        server.listen()
