"""`X402_EXPLORERS`: the block explorers the dashboard links to, given by the operator per network.

Comma-separated `eip155:<chain id>=<base URL>` pairs, e.g.
`eip155:8453=https://base.blockscout.com,eip155:31337=http://127.0.0.1:5100`. Each replaces the built-in
explorer of its network (`dashboard.EXPLORERS`), and is the only way a dev chain gets links. An explorer
must answer EIP-3091 paths under its base: `/tx/<hash>`, `/address/<address>`, `/token/<address>`,
`/block/<number>`; a query in the base (`https://seitrace.com?chain=atlantic-2`) follows the path.
"""

from __future__ import annotations

from a2a_x402.facilitator import evm_network, http_url

__all__ = ["explorer_entries"]


def explorer_entries(value: str) -> dict[str, str]:
    """The explorer's base URL per CAIP-2 network in `value`; blank entries are skipped.

    Raises:
        ValueError: an entry is not `network=URL`, names a network that is not `eip155:<chain id>` or one
            given before, or its URL is not an absolute http(s) URL (the message names the entry by its
            position and network, never the URL: it may carry an API key).
    """
    found: dict[str, str] = {}
    for position, entry in enumerate((part.strip() for part in value.split(",")), start=1):
        if not entry:
            continue
        network, equals, url = (part.strip() for part in entry.partition("="))
        if not equals or not network or not url:
            raise ValueError(f"entry {position} is not eip155:<chain id>=<base URL>")
        try:
            evm_network(network)
        except ValueError as exc:
            raise ValueError(f"entry {position}: the network {exc}") from None
        try:
            http_url(url)
        except ValueError as exc:
            raise ValueError(f"entry {position} ({network}): the URL {exc}") from None
        if network in found:
            raise ValueError(f"entry {position}: {network} is given twice")
        found[network] = url
    return found
