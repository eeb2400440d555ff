"""Prefixed, time-ordered identifiers for ledger rows."""

from __future__ import annotations

import secrets
import time

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """`<prefix>_` + 12 hex digits of Unix milliseconds + 16 random hex digits.

    Fixed width, so the text order of ids made in different milliseconds is their creation order; the
    random part (64 bits) keeps ids made in the same millisecond, on any replica, apart.
    """
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(8)}"
