"""The env file of ``x402-devchain``: written privately, read back, probed, removed only by its writer; and
the ports a chain writing it prefers, so that a restarted chain comes back where the settings point."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from ._errors import RpcError
from ._rpc import RpcClient

__all__ = [
    "home_port",
    "live_node",
    "loopback_port",
    "probe",
    "read_settings",
    "remember_port",
    "remembered_port",
    "remove_if_unchanged",
    "write_private",
]

_PROBE_TIMEOUT_S = 3.0
_ENV_LINE = re.compile(r"^(X402_[A-Z0-9_]+)=(.*)$")
# Home ports are drawn from 10000-19999: below Linux's ephemeral range (32768-60999), where free-port picks
# land, and below the blocks the tests hand out to their servers (tests/fixtures/servers.py, from 20000).
_HOME_PORT_BASE = 10000
_HOME_PORT_SPAN = 10000


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 (it holds dev keys), all at once."""
    # Write then rename, so a reader polling for the file never sees half of it; the partial file is this
    # process's own, so two chains starting together do not write into one.
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(partial, path)


def read_settings(path: Path) -> dict[str, str]:
    """The `X402_*` settings of the env file at `path`, in its order.

    Raises:
        FileNotFoundError: there is no such file.
    """
    return {match[1]: match[2] for line in path.read_text().splitlines() if (match := _ENV_LINE.match(line))}


def live_node(path: Path) -> str | None:
    """The RPC URL the env file at `path` names if a node answers there; None for no file or a stale one."""
    try:
        rpc_url = read_settings(path).get("X402_RPC_URL")
    except (OSError, UnicodeDecodeError):
        return None
    if rpc_url is None or probe(rpc_url) is not None:
        return None
    return rpc_url


def probe(rpc_url: str) -> Exception | None:
    """None if the node at `rpc_url` answers `eth_chainId`, else why it does not."""
    try:
        with RpcClient(rpc_url, timeout_s=_PROBE_TIMEOUT_S) as rpc:
            rpc.call("eth_chainId")
    except (httpx.HTTPError, httpx.InvalidURL, RpcError, ValueError) as exc:
        return exc
    return None


def remove_if_unchanged(path: Path, text: str) -> None:
    """Delete the file at `path` if it still holds `text`: another run may have written it since."""
    try:
        if path.read_text() != text:
            return
    except (OSError, UnicodeDecodeError):
        return
    path.unlink(missing_ok=True)


def home_port(path: Path) -> int:
    """The port every chain writing the env file at `path` prefers: the same on every run, from its path."""
    digest = hashlib.sha256(str(path.resolve()).encode()).digest()
    return _HOME_PORT_BASE + int.from_bytes(digest[:4], "big") % _HOME_PORT_SPAN


def _port_file(path: Path) -> Path:
    return path.with_name(f"{path.name}.port")


def remember_port(path: Path, port: int) -> None:
    """Keep `port`, asked for with `--port`, for the next chains on the env file at `path`.

    Beside the env file, not in it: the env file goes when its chain stops, the choice stays.
    """
    _port_file(path).write_text(f"{port}\n")


def remembered_port(path: Path) -> int | None:
    """The port a `--port` chose for chains on the env file at `path`; None if none was, or it is no port."""
    try:
        text = _port_file(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.isdigit() or not 1024 <= int(text) <= 65535:
        return None
    return int(text)


def loopback_port(path: Path) -> int | None:
    """The unprivileged loopback port the env file at `path` names in its RPC URL; None for none or no file.

    A dev chain never listens on a privileged port (below 1024), so a file naming one was not written by it.
    """
    try:
        rpc_url = read_settings(path).get("X402_RPC_URL")
    except (OSError, UnicodeDecodeError):
        return None
    if rpc_url is None:
        return None
    try:
        parts = urlsplit(rpc_url)
        port = parts.port
    except ValueError:  # not a URL, or its port is not a number
        return None
    if parts.hostname not in ("127.0.0.1", "localhost") or port is None or port < 1024:
        return None
    return port
