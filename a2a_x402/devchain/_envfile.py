"""The env file of ``x402-devchain``: written privately, read back, probed, removed only by its writer."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx

from ._errors import RpcError
from ._rpc import RpcClient

__all__ = ["live_node", "probe", "read_settings", "remove_if_unchanged", "write_private"]

_PROBE_TIMEOUT_S = 3.0
_ENV_LINE = re.compile(r"^(X402_[A-Z0-9_]+)=(.*)$")


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
