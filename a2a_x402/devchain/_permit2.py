"""Permit2 and x402's two Permit2 proxies at their canonical addresses, as on public chains.

x402 clients sign for these addresses, fixed in their SDKs, so the dev chain's own contracts (``DevPermit2``,
``DevExactPermit2Proxy``, ``DevUptoPermit2Proxy``) must live there. DevPermit2 has no constructor state, so
its runtime code is set at the address directly. A proxy keeps the Permit2 address it is built with as an
immutable, which lives in its runtime code only once a constructor has run: it is deployed normally with the
canonical Permit2 address, and the code it was left with is copied to the canonical proxy address.
"""

from __future__ import annotations

from eth_abi.abi import encode

from ._artifacts import load_artifact
from ._rpc import RpcClient

__all__ = [
    "EXACT_PERMIT2_PROXY_ADDRESS",
    "PERMIT2_ADDRESS",
    "UPTO_PERMIT2_PROXY_ADDRESS",
    "install_permit2",
]

# Uniswap's Permit2, at this address on every public chain it is deployed to (a CREATE2 deployment).
PERMIT2_ADDRESS = "0x000000000022D473030F116dDEE9F6B43aC78BA3"
# x402's x402ExactPermit2Proxy and x402UptoPermit2Proxy, the spenders the x402 SDKs sign Permit2 permits for.
EXACT_PERMIT2_PROXY_ADDRESS = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
UPTO_PERMIT2_PROXY_ADDRESS = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002"

_PROXIES = (
    ("DevExactPermit2Proxy", EXACT_PERMIT2_PROXY_ADDRESS),
    ("DevUptoPermit2Proxy", UPTO_PERMIT2_PROXY_ADDRESS),
)


def install_permit2(rpc: RpcClient, deployer_key: str, set_code_method: str) -> None:
    """Put DevPermit2 and both x402 proxies at their canonical addresses.

    Args:
        rpc: client of the node.
        deployer_key: an account with ETH, which deploys the proxies before their code is copied.
        set_code_method: the node's method that puts code at an address (see ``deploy_devchain``).
    """
    rpc.call(set_code_method, [PERMIT2_ADDRESS, load_artifact("DevPermit2").deployed_bytecode])
    for contract, address in _PROXIES:
        code = bytes.fromhex(load_artifact(contract).bytecode[2:])
        built = rpc.transact(deployer_key, to=None, data=code + encode(["address"], [PERMIT2_ADDRESS]))
        runtime = rpc.call("eth_getCode", [built["contractAddress"], "latest"])
        # The proxies' only storage is OpenZeppelin's reentrancy flag, which works from zero: code is enough.
        rpc.call(set_code_method, [address, runtime])
