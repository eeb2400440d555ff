"""What both ``x402-pay`` commands take alike: the payer's key (read, checked, redacted from every log line)
with the log setup, and the check of an RPC URL."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import click

from a2a_x402.observability import LogSettingsError, configure_tool_logging, redact_values

__all__ = ["checked_rpc_url", "setup"]

_DEVCHAIN_KEYS_ENV = "X402_PAYER_KEYS"
_HEX_KEY = re.compile(r"(0x)?[0-9a-fA-F]{64}")


def setup(key: str | None, key_file: Path | None, *, verbose: bool) -> str:
    """Configure the logs and return the payer's key, redacted from every log line."""
    try:
        configure_tool_logging(logging.INFO if verbose else logging.WARNING)
    except LogSettingsError as exc:
        raise click.UsageError(str(exc)) from None
    private_key = _read_key(key, key_file)
    redact_values([private_key])  # whatever a dependency logs at DEBUG, the key is never written
    if not _HEX_KEY.fullmatch(private_key):  # never echoed: it may be a key mistyped
        raise click.UsageError(
            f"the payer's key is not 32 bytes of hex (--key, --key-file, X402_PAYER_KEY or the first of "
            f"{_DEVCHAIN_KEYS_ENV})"
        )
    return private_key


def _read_key(key: str | None, key_file: Path | None) -> str:
    if key is not None and key_file is not None:
        raise click.UsageError("give either --key or --key-file, not both")
    if key_file is not None:
        return key_file.read_text().strip()
    if key:
        return key.strip()
    devchain_keys = os.environ.get(_DEVCHAIN_KEYS_ENV, "").split(",")
    if devchain_keys[0].strip():
        return devchain_keys[0].strip()
    raise click.UsageError(f"no key: use --key-file, --key, X402_PAYER_KEY or {_DEVCHAIN_KEYS_ENV}")


def checked_rpc_url(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """--rpc-url as given, once it is an absolute http(s) URL."""
    if value is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value):
        raise click.BadParameter("the RPC URL must be an absolute http(s) URL (e.g. http://127.0.0.1:8545)")
    return value
