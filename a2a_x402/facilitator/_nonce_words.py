"""What each node says when it refuses a transaction for its nonce.

Every node words the refusal its own way, and the relayer must recognise all of them: a send refused as
"nonce too low" means the key's nonce moved on (an outside transaction, another process), so the relayer
re-reads the chain's count and carries on; missed, the refusal fails the settlement and every later one.

Messages, from the nodes' sources:

- geth, Erigon, anvil, reth: ``nonce too low`` (geth adds ``: next nonce 49, tx nonce 48``);
- Hardhat (EDR): ``Nonce too low. Expected nonce to be 49 but got 48.``;
- ganache 7 and EthereumJS: ``the tx doesn't have the correct nonce. account has nonce of: 49 tx has nonce
  of: 48`` (the same words for too high: the two numbers tell which);
- Nethermind: ``OldNonce`` or ``OldNonce, Current nonce: 49, nonce of rejected tx: 48`` (too high is
  ``NonceGap``);
- Besu: ``Nonce too low`` (its transaction-pool reason reads ``transaction nonce 48 below sender account
  nonce 49``).
"""

from __future__ import annotations

import re

_TOO_LOW_PHRASES = ("nonce too low", "oldnonce", "below sender account nonce")
_TOO_HIGH_PHRASES = ("nonce too high", "noncegap", "noncetoofarinfuture")
# ganache / EthereumJS name both numbers instead of a direction.
_GANACHE = re.compile(r"account has nonce of:?\s*(\d+)\s*tx has nonce of:?\s*(\d+)")


def nonce_too_low(message: str) -> bool:
    """Whether a node refused a send because its nonce is already used (by any node's wording)."""
    text = message.lower()
    if any(phrase in text for phrase in _TOO_LOW_PHRASES):
        return True
    found = _GANACHE.search(text)
    return found is not None and int(found.group(2)) < int(found.group(1))


def nonce_too_high(message: str) -> bool:
    """Whether a node refused a send because its nonce is above the account's next (a gap)."""
    text = message.lower()
    if any(phrase in text for phrase in _TOO_HIGH_PHRASES):
        return True
    found = _GANACHE.search(text)
    return found is not None and int(found.group(2)) > int(found.group(1))
