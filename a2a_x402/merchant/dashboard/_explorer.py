"""Links to a block explorer, and hex values shortened for a table cell or within a sentence.

Only networks with a well-known public explorer get links (CAIP-2 ids below), and those the operator names
(`X402_EXPLORERS`); a dev chain gets none of the built-in ones, since no public explorer knows its
transactions. The dev chain borrows Base Sepolia's chain id, so the id alone cannot tell it:
`is_local_chain` (a JSON-RPC node on this machine and no facilitator elsewhere) decides, and the merchant
then passes only the operator's explorers; a wrong link would be worse than none. The dashboard links out
with `rel="noopener noreferrer"`, so the explorer learns nothing about the page.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

__all__ = ["EXPLORERS", "explorer_url", "explorers_for", "hex_runs", "is_local_chain", "shorten"]

EXPLORERS = {
    "eip155:1": "https://etherscan.io",
    "eip155:11155111": "https://sepolia.etherscan.io",
    "eip155:8453": "https://basescan.org",
    "eip155:84532": "https://sepolia.basescan.org",
    "eip155:2741": "https://abscan.org",
    "eip155:11124": "https://sepolia.abscan.org",
    "eip155:43114": "https://snowtrace.io",
    "eip155:43113": "https://testnet.snowtrace.io",
    "eip155:42220": "https://celoscan.io",
    "eip155:656476": "https://opencampus-codex.blockscout.com",
    "eip155:14": "https://flare-explorer.flare.network",
    "eip155:4689": "https://iotexscan.io",
    "eip155:4326": "https://mega.etherscan.io",
    "eip155:143": "https://monadscan.com",
    "eip155:10143": "https://testnet.monadexplorer.com",
    "eip155:137": "https://polygonscan.com",
    "eip155:80002": "https://amoy.polygonscan.com",
    # Seitrace serves both Sei chains, told apart by a query parameter.
    "eip155:1329": "https://seitrace.com?chain=pacific-1",
    "eip155:1328": "https://seitrace.com?chain=atlantic-2",
    "eip155:1444673419": "https://juicy-low-small-testnet.explorer.testnet.skalenodes.com",
    "eip155:988": "https://stablescan.xyz",
    "eip155:2201": "https://testnet.stablescan.xyz",
}
"""The explorer's base URL per CAIP-2 network: every network of x402's (`facilitator.wire`) whose
well-known public explorer answers EIP-3091 paths (`/tx/<hash>`, `/address/<address>`, `/token/<address>`,
`/block/<number>`), and Ethereum's Sepolia. Left out: peaq (Subscan names an address `/account/`) and
Story's retired Iliad testnet (1513); `X402_EXPLORERS` adds or replaces any network's."""

_KINDS = {"address": "address", "tx": "tx", "token": "token", "block": "block"}
_HEAD, _TAIL = 6, 4
_LONG_HEX = re.compile(r"0x[0-9a-fA-F]{40,}")  # an address, a hash, a nonce


def explorer_url(
    network: str, kind: str, value: str | int, explorers: Mapping[str, str] = EXPLORERS
) -> str | None:
    """The explorer's page of `value` (an address, a transaction hash, a token or a block number) on
    `network`, or None when `explorers` has none for the network or `kind` is not one of its pages. A
    query in the explorer's base URL follows the page's path."""
    base = explorers.get(network)
    path = _KINDS.get(kind)
    if base is None or path is None:
        return None
    root, question, query = base.partition("?")
    return f"{root.rstrip('/')}/{path}/{quote(str(value), safe='')}{question}{query}"


def explorers_for(rpc_url: str, facilitator_url: str | None, custom: Mapping[str, str]) -> dict[str, str]:
    """The explorers a merchant's dashboard links to: the built-in ones (none on a dev chain,
    `is_local_chain`), with the operator's `custom` ones (`X402_EXPLORERS`) added or in their place."""
    return ({} if is_local_chain(rpc_url, facilitator_url) else dict(EXPLORERS)) | dict(custom)


def shorten(value: str) -> tuple[str, str, str]:
    """`value` split for display as head…tail: (head, the hidden middle, tail); a value too short to
    shorten is all head. `0x` + 40 hex digits -> ("0x1234", "...", "abcd")."""
    if len(value) <= _HEAD + _TAIL + 2:
        return value, "", ""
    return value[:_HEAD], value[_HEAD:-_TAIL], value[-_TAIL:]


def hex_runs(text: str) -> list[tuple[str, bool]]:
    """`text` cut into runs, each with whether it is a long hex value (to be shortened): a sentence of
    the reconciler's holds addresses, hashes and nonces that would run over a phone's width."""
    runs: list[tuple[str, bool]] = []
    at = 0
    for found in _LONG_HEX.finditer(text):
        if found.start() > at:
            runs.append((text[at : found.start()], False))
        runs.append((found.group(), True))
        at = found.end()
    if at < len(text):
        runs.append((text[at:], False))
    return runs


def is_local_chain(rpc_url: str, facilitator_url: str | None) -> bool:
    """Whether payments settle on a chain served from this machine (a dev chain): the merchant settles
    itself (no facilitator) through a JSON-RPC node on a loopback address or `localhost`."""
    if facilitator_url:
        return False
    host = urlsplit(rpc_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
