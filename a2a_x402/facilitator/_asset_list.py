"""`X402_ASSETS`: the tokens a facilitator settles, each optionally with the EIP-712 domain payers sign.

The value is comma-separated entries, each a token address alone (`0xA0b8…`) or followed by the expected
EIP-712 name and version (`0xA0b8…:USD Coin:2`). `x402-facilitator check` reads each token's code, domain
and decimals, and compares the domain with the one listed. A name may hold a colon (the version is what
follows the last one) but no comma.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .wire import checksum_address

__all__ = ["AssetEntry", "asset_entries", "format_asset_entries"]

_HEX_KEY = re.compile(r"^(0x)?[0-9a-fA-F]{64}$")
_HEX_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_MAX_ENTRIES = 64
_MAX_TEXT = 128


@dataclass(frozen=True)
class AssetEntry:
    """A token of `X402_ASSETS`: its EIP-55 address and, if listed, the EIP-712 name and version expected."""

    address: str
    name: str | None = None
    version: str | None = None


def asset_entries(value: str) -> tuple[AssetEntry, ...]:
    """The tokens listed in `value` (see the module), in order, each address once; blank entries skipped.

    Raises:
        ValueError: naming the first entry that is not an address (by position only when it has the shape
            of a private key, never shown), lists a name without a version, repeats an address, or is
            longer than anyone needs.
    """
    found: dict[str, AssetEntry] = {}
    for position, entry in enumerate((part.strip() for part in value.split(",")), start=1):
        if not entry:
            continue
        if position > _MAX_ENTRIES:
            raise ValueError(f"lists more than {_MAX_ENTRIES} tokens")
        address_text, _, domain = entry.partition(":")
        address_text = address_text.strip()
        if _HEX_KEY.match(address_text):
            raise ValueError(f"entry {position} is 32 bytes of hex (a private key?), not a 20-byte address")
        if not _HEX_ADDRESS.match(address_text):
            raise ValueError(
                f"entry {position} does not start with a token address: list tokens as 0x-prefixed "
                "20-byte hex addresses, each optionally followed by :name:version, separated by commas"
            )
        address = checksum_address(address_text)
        digits = address_text[2:]
        if digits not in (digits.lower(), digits.upper()) and address != address_text:
            raise ValueError(f"{address_text} has a wrong EIP-55 checksum (expected {address})")
        if address in found:
            raise ValueError(f"{address} is listed twice")
        found[address] = _with_domain(address, domain, position)
    return tuple(found.values())


def _with_domain(address: str, domain: str, position: int) -> AssetEntry:
    if not domain:
        return AssetEntry(address)
    name, colon, version = domain.rpartition(":")
    if not colon or not name.strip() or not version.strip():
        raise ValueError(
            f"entry {position} names a domain without both a name and a version (address:name:version)"
        )
    if len(domain) > _MAX_TEXT:
        raise ValueError(f"entry {position}'s name and version are longer than {_MAX_TEXT} characters")
    return AssetEntry(address, name.strip(), version.strip())


def format_asset_entries(entries: tuple[AssetEntry, ...]) -> str:
    """`entries` written back as an `X402_ASSETS` value (checksummed, one spelling per configuration)."""
    return ",".join(
        entry.address if entry.name is None else f"{entry.address}:{entry.name}:{entry.version}"
        for entry in entries
    )
