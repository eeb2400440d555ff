"""The project's dev chain: an EIP-3009 test token (USDC v2.2 look-alike) on a local anvil node, with Permit2
and x402's exact and upto Permit2 proxies at their canonical addresses, and two tokens without EIP-3009 (a
plain ERC-20, and one with EIP-2612) to pay through them.

``start_devchain()`` gives a running chain with the token deployed and payers funded;
``x402-devchain`` (``devchain.cli``) does the same from the command line and writes an env file.
"""

from __future__ import annotations

from ._anvil import ANVIL_DEV_KEYS, DEFAULT_CHAIN_ID, AnvilNode
from ._artifacts import Artifact, load_artifact
from ._deploy import (
    DEFAULT_MINT_ATOMIC,
    MULTICALL3_ADDRESS,
    PERMIT_ASSET_NAME,
    PERMIT_ASSET_VERSION,
    DevChain,
    deploy_devchain,
    start_devchain,
)
from ._errors import AnvilNotFoundError, AnvilStartError, DevchainError, RpcError, TransactionFailedError
from ._permit2 import EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS, UPTO_PERMIT2_PROXY_ADDRESS
from ._rpc import RpcClient, encode_call

__all__ = [
    "ANVIL_DEV_KEYS",
    "DEFAULT_CHAIN_ID",
    "DEFAULT_MINT_ATOMIC",
    "EXACT_PERMIT2_PROXY_ADDRESS",
    "MULTICALL3_ADDRESS",
    "PERMIT2_ADDRESS",
    "PERMIT_ASSET_NAME",
    "PERMIT_ASSET_VERSION",
    "UPTO_PERMIT2_PROXY_ADDRESS",
    "AnvilNode",
    "AnvilNotFoundError",
    "AnvilStartError",
    "Artifact",
    "DevChain",
    "DevchainError",
    "RpcClient",
    "RpcError",
    "TransactionFailedError",
    "deploy_devchain",
    "encode_call",
    "load_artifact",
    "start_devchain",
]
