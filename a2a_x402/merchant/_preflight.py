"""What `x402-merchant serve` checks before it listens, so that a mistake is one line and nothing starts.

The app's lifespan checks the same again (it also runs without this CLI); here the answers are the
operator's: the database each setting names is reachable and migrated (a SQLite file is never created by
looking), and the node at `X402_RPC_URL` is reachable and serves `X402_NETWORK`'s chain.
"""

from __future__ import annotations

from a2a_x402.facilitator import ChainMismatchError, ChainUnavailableError, RpcClient
from a2a_x402.facilitator.wire import chain_id_from_caip2
from a2a_x402.storage import ensure_schema_current

from .settings import MerchantSettings

__all__ = ["preflight"]

_NODE_TIMEOUT_S = 10.0


async def preflight(settings: MerchantSettings) -> None:
    """Check the database and the node `settings` name.

    Raises:
        storage.DatabaseUrlError, storage.DatabaseUnavailableError, storage.SchemaOutdatedError: the database.
        ChainUnavailableError: the node cannot be reached.
        ChainMismatchError: the node serves another chain than `X402_NETWORK`.
    """
    branches = ("merchant",) if settings.facilitator_url else ("merchant", "facilitator")
    await ensure_schema_current(settings.database_url, *branches)
    rpc = RpcClient(settings.rpc_url, timeout_s=_NODE_TIMEOUT_S)
    try:
        try:
            node_chain_id = int(await rpc.call("eth_chainId"), 16)
        except ChainUnavailableError as exc:
            raise ChainUnavailableError(f"{exc}: check X402_RPC_URL and that the node runs") from exc
    finally:
        await rpc.aclose()
    if node_chain_id != chain_id_from_caip2(settings.network):
        raise ChainMismatchError(
            f"the RPC node serves chain {node_chain_id}, but X402_NETWORK is {settings.network}"
        )
