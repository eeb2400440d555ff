"""The project's dev chain: an EIP-3009 test token (USDC v2.2 look-alike) on a local anvil node.

``start_devchain()`` gives a running chain with the token deployed and payers funded;
``x402-devchain`` (``devchain.cli``) does the same from the command line and writes an env file.
"""

from __future__ import annotations

from ._anvil import ANVIL_DEV_KEYS, DEFAULT_CHAIN_ID, AnvilNode
from ._artifacts import Artifact, load_artifact
from ._deploy import DEFAULT_MINT_ATOMIC, MULTICALL3_ADDRESS, DevChain, deploy_devchain, start_devchain
from ._errors import AnvilNotFoundError, AnvilStartError, DevchainError, RpcError, TransactionFailedError
from ._rpc import RpcClient, encode_call

__all__ = [
    "ANVIL_DEV_KEYS",
    "DEFAULT_CHAIN_ID",
    "DEFAULT_MINT_ATOMIC",
    "MULTICALL3_ADDRESS",
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
