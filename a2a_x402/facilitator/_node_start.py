"""The facilitator's first read of its node at start-up, patient with a node that is only slow."""

from __future__ import annotations

import logging

from ._errors import ChainUnavailableError, RpcTimeoutError
from ._rpc import RpcClient

logger = logging.getLogger(__name__)

# How many times the start-up asks a node that takes the request and does not answer in time.
START_ATTEMPTS = 3
_HINT = "check X402_RPC_URL and that the node runs"


async def node_chain_id(rpc: RpcClient) -> int:
    """The chain id `rpc`'s node serves, read at start-up.

    A node that took the request and gave no answer within the RPC timeout is busy (a loaded host, a node
    catching up), not misconfigured: it is asked again, `START_ATTEMPTS` times in all, each timeout logged
    as a warning. One that cannot be reached (nothing listens, the connection is refused) fails at once.

    Raises:
        ChainUnavailableError: the node could not be reached, or answered none of the attempts in time.
    """
    attempt = 1
    while True:
        try:
            return int(await rpc.call("eth_chainId"), 16)
        except RpcTimeoutError as exc:
            if attempt == START_ATTEMPTS:
                raise ChainUnavailableError(f"{exc} ({attempt} times): {_HINT}") from exc
            logger.warning("%s (start-up attempt %d of %d): asking it again", exc, attempt, START_ATTEMPTS)
            attempt += 1
        except ChainUnavailableError as exc:
            raise ChainUnavailableError(f"{exc}: {_HINT}") from exc
