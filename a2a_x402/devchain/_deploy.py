"""Deploy the dev token on anvil, fund payers, and describe the result as a ``DevChain``.

The token is deployed from anvil's dev account 0 (its owner, pauser and blacklister, who may mint); dev
account 1 is the relayer that pays gas for settlements. Payers are fresh keys generated per run that hold
tokens but no ETH, like real x402 payers who only sign. Multicall3's `aggregate3` is put at its canonical
address, where public chains have it, and a CREATE2 wallet factory is deployed for ERC-6492 wallets.
Permit2 and x402's exact and upto Permit2 proxies are put at their canonical addresses (``_permit2``),
beside two tokens paid through them: a plain ERC-20 and one with EIP-2612, neither with EIP-3009.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from eth_abi.abi import decode, encode
from eth_account import Account
from eth_utils.address import to_checksum_address

from ._anvil import ANVIL_DEV_KEYS, DEFAULT_CHAIN_ID, AnvilNode
from ._artifacts import load_artifact
from ._permit2 import (
    EXACT_PERMIT2_PROXY_ADDRESS,
    PERMIT2_ADDRESS,
    UPTO_PERMIT2_PROXY_ADDRESS,
    install_permit2,
)
from ._rpc import RpcClient, encode_call

__all__ = [
    "DEFAULT_MINT_ATOMIC",
    "MULTICALL3_ADDRESS",
    "PERMIT_ASSET_NAME",
    "PERMIT_ASSET_VERSION",
    "DevChain",
    "deploy_devchain",
    "start_devchain",
]

# Base Sepolia USDC's EIP-712 domain name and version; x402 clients sign against these.
ASSET_NAME = "USDC"
ASSET_VERSION = "2"
ASSET_DECIMALS = 6
DEFAULT_MINT_ATOMIC = 1_000 * 10**ASSET_DECIMALS
# Multicall3's address on every public EVM chain (deployed there from a keyless transaction).
MULTICALL3_ADDRESS = "0xcA11bde05977b3631167028862bE2a173976CA11"
# The plain ERC-20 has 18 decimals, as most tokens without EIP-3009 do; the EIP-2612 one has USDC's 6.
_PLAIN_ASSET = ("Dev Token", "DEV", 18)
PERMIT_ASSET_NAME = "Dev Permit Token"
PERMIT_ASSET_VERSION = "1"
_PERMIT_ASSET_SYMBOL, _PERMIT_ASSET_DECIMALS = "DPT", 6
# ETH given to an account for its Permit2 approval: far above an approve's cost at a dev node's base fee.
_APPROVAL_GAS_WEI = 10**16
_MAX_UINT256 = 2**256 - 1


@dataclass(frozen=True)
class DevChain:
    """A running dev chain with the token deployed: the settings other commands need, plus helpers."""

    chain_id: int
    asset: str
    asset_name: str
    asset_version: str
    decimals: int
    deployer_key: str
    relayer_key: str
    payer_keys: tuple[str, ...]
    erc1271_wallet: str
    erc1271_wallet_owner_key: str
    wallet_factory: str
    plain_asset: str
    """An ERC-20 with neither EIP-3009 nor EIP-2612 (``DevToken``, 18 decimals), paid through Permit2 only."""
    permit_asset: str
    """An ERC-20 with EIP-2612 and no EIP-3009 (``DevPermitToken``, 6 decimals; EIP-712 domain
    ``PERMIT_ASSET_NAME``, ``PERMIT_ASSET_VERSION``): its holders may approve Permit2 by signature."""
    rpc: RpcClient = field(repr=False, compare=False)

    @property
    def rpc_url(self) -> str:
        """The node's JSON-RPC URL."""
        return self.rpc.url

    @property
    def network(self) -> str:
        """The CAIP-2 network id, e.g. ``eip155:84532``."""
        return f"eip155:{self.chain_id}"

    @property
    def permit2(self) -> str:
        """Permit2's canonical address, where the dev chain has its own ``DevPermit2``."""
        return PERMIT2_ADDRESS

    @property
    def exact_permit2_proxy(self) -> str:
        """The canonical address of x402's exact Permit2 proxy (``DevExactPermit2Proxy`` here)."""
        return EXACT_PERMIT2_PROXY_ADDRESS

    @property
    def upto_permit2_proxy(self) -> str:
        """The canonical address of x402's upto Permit2 proxy (``DevUptoPermit2Proxy`` here)."""
        return UPTO_PERMIT2_PROXY_ADDRESS

    def eip712_domain(self) -> dict[str, Any]:
        """The token's EIP-712 domain, as eth-account's ``sign_typed_data`` takes it."""
        return {
            "name": self.asset_name,
            "version": self.asset_version,
            "chainId": self.chain_id,
            "verifyingContract": self.asset,
        }

    def env(self) -> dict[str, str]:
        """The settings as ``X402_*`` environment variables."""
        return {
            "X402_RPC_URL": self.rpc_url,
            "X402_NETWORK": self.network,
            "X402_ASSET": self.asset,
            "X402_ASSET_NAME": self.asset_name,
            "X402_ASSET_VERSION": self.asset_version,
            "X402_RELAYER_KEY": self.relayer_key,
            "X402_PAYER_KEYS": ",".join(self.payer_keys),
            # The dev chain's own wallet factory, so that its counterfactual wallets can pay.
            "X402_ERC6492_FACTORIES": self.wallet_factory,
        }

    def mint(self, to: str, amount_atomic: int, *, asset: str | None = None) -> None:
        """Mint ``amount_atomic`` units of ``asset`` (default: ``self.asset``) to ``to``; the deployer, who
        owns every dev token, sends it."""
        self.rpc.transact(
            self.deployer_key,
            to=asset or self.asset,
            data=encode_call("mint(address,uint256)", [to, amount_atomic]),
        )

    def approve_permit2(self, key: str, asset: str, amount_atomic: int = _MAX_UINT256) -> None:
        """Approve Permit2 to spend ``asset`` of ``key``'s account (all of it by default): the one on-chain
        step of a Permit2 payer. The deployer first gives the account the ETH it costs."""
        owner = Account.from_key(key).address
        self.rpc.transact(self.deployer_key, to=owner, data=b"", value_wei=_APPROVAL_GAS_WEI)
        self.rpc.transact(
            key, to=asset, data=encode_call("approve(address,uint256)", [PERMIT2_ADDRESS, amount_atomic])
        )

    def permit2_nonce_used(self, owner: str, nonce: int) -> bool:
        """True once Permit2 ``nonce`` of ``owner`` is spent, by a transfer or by invalidation."""
        data = encode_call("nonceBitmap(address,uint256)", [owner, nonce >> 8])
        (bits,) = decode(["uint256"], self.rpc.eth_call(PERMIT2_ADDRESS, data))
        return bool(int(bits) >> (nonce & 0xFF) & 1)

    def new_payer(self, amount_atomic: int = DEFAULT_MINT_ATOMIC) -> str:
        """Generate a fresh key, mint ``amount_atomic`` to it and return the key (``0x`` hex, no ETH)."""
        account = Account.create()
        self.mint(account.address, amount_atomic)
        return str(account.key.to_0x_hex())

    def counterfactual_wallet(self, owner: str, salt: bytes) -> str:
        """The address ``WalletFactory.createWallet(owner, salt)`` deploys an ERC-1271 wallet to."""
        data = encode_call("walletAddress(address,bytes32)", [owner, salt])
        (wallet,) = decode(["address"], self.rpc.eth_call(self.wallet_factory, data))
        return to_checksum_address(wallet)

    def set_paused(self, paused: bool) -> None:
        """Pause or unpause the token (sent by its pauser, the deployer)."""
        self.rpc.transact(
            self.deployer_key, to=self.asset, data=encode_call("pause()" if paused else "unpause()")
        )

    def set_blacklisted(self, account: str, blacklisted: bool) -> None:
        """Blacklist ``account`` or lift it (sent by the token's blacklister, the deployer)."""
        signature = "blacklist(address)" if blacklisted else "unBlacklist(address)"
        self.rpc.transact(self.deployer_key, to=self.asset, data=encode_call(signature, [account]))

    def balance_of(self, address: str, *, asset: str | None = None) -> int:
        """Balance of ``address`` in ``asset`` (default: ``self.asset``), in atomic units."""
        data = encode_call("balanceOf(address)", [address])
        (balance,) = decode(["uint256"], self.rpc.eth_call(asset or self.asset, data))
        return int(balance)

    def authorization_state(self, authorizer: str, nonce: bytes) -> bool:
        """True once the EIP-3009 ``nonce`` of ``authorizer`` is used or canceled."""
        data = encode_call("authorizationState(address,bytes32)", [authorizer, nonce])
        (state,) = decode(["bool"], self.rpc.eth_call(self.asset, data))
        return bool(state)


def _deploy(rpc: RpcClient, key: str, contract: str, arg_types: Sequence[str], args: Sequence[Any]) -> str:
    artifact = load_artifact(contract)
    init_code = bytes.fromhex(artifact.bytecode[2:]) + encode(list(arg_types), list(args))
    receipt = rpc.transact(key, to=None, data=init_code)
    return to_checksum_address(receipt["contractAddress"])


def deploy_devchain(
    rpc: RpcClient,
    *,
    payers: int = 3,
    mint_atomic: int = DEFAULT_MINT_ATOMIC,
    set_code_method: str = "anvil_setCode",
) -> DevChain:
    """Deploy ``DevUSDC("USDC", "USDC", "2")``, a ``MockERC1271Wallet``, a ``WalletFactory``, Multicall3,
    Permit2 with x402's two proxies, and the two tokens paid through them; then fund payers and the wallet
    with the asset.

    Args:
        rpc: client of a fresh node (dev accounts 0 and 1 of anvil's mnemonic must hold ETH).
        payers: how many fresh payer keys to generate.
        mint_atomic: tokens minted to each payer and to the wallet, in atomic units.
        set_code_method: the node's method that puts code at an address (Multicall3, Permit2 and the proxies
            at their canonical addresses): ``anvil_setCode``, Hardhat's ``hardhat_setCode``, ganache's
            ``evm_setAccountCode``.
    """
    deployer_key, relayer_key = ANVIL_DEV_KEYS[0], ANVIL_DEV_KEYS[1]
    asset = _deploy(rpc, deployer_key, "DevUSDC", ["string"] * 3, [ASSET_NAME, ASSET_NAME, ASSET_VERSION])
    wallet_owner = Account.create()
    wallet = _deploy(rpc, deployer_key, "MockERC1271Wallet", ["address"], [wallet_owner.address])
    factory = _deploy(rpc, deployer_key, "WalletFactory", [], [])
    rpc.call(set_code_method, [MULTICALL3_ADDRESS, load_artifact("DevMulticall3").deployed_bytecode])
    install_permit2(rpc, deployer_key, set_code_method)
    plain_asset = _deploy(rpc, deployer_key, "DevToken", ["string", "string", "uint8"], _PLAIN_ASSET)
    permit_asset = _deploy(
        rpc,
        deployer_key,
        "DevPermitToken",
        ["string", "string", "string", "uint8"],
        [PERMIT_ASSET_NAME, _PERMIT_ASSET_SYMBOL, PERMIT_ASSET_VERSION, _PERMIT_ASSET_DECIMALS],
    )
    chain = DevChain(
        chain_id=int(rpc.call("eth_chainId"), 16),
        asset=asset,
        asset_name=ASSET_NAME,
        asset_version=ASSET_VERSION,
        decimals=ASSET_DECIMALS,
        deployer_key=deployer_key,
        relayer_key=relayer_key,
        payer_keys=(),
        erc1271_wallet=wallet,
        erc1271_wallet_owner_key=wallet_owner.key.to_0x_hex(),
        wallet_factory=factory,
        plain_asset=plain_asset,
        permit_asset=permit_asset,
        rpc=rpc,
    )
    chain.mint(wallet, mint_atomic)
    return dataclasses.replace(chain, payer_keys=tuple(chain.new_payer(mint_atomic) for _ in range(payers)))


@contextmanager
def start_devchain(
    *,
    chain_id: int = DEFAULT_CHAIN_ID,
    payers: int = 3,
    mint_atomic: int = DEFAULT_MINT_ATOMIC,
    anvil_args: Sequence[str] = (),
    block_time_s: int = 0,
) -> Iterator[DevChain]:
    """Start anvil, deploy the token and yield the ``DevChain``; anvil and its state are removed on exit.

    ``block_time_s`` > 0 mines a block every that many seconds once the token is deployed; 0 mines one
    block per transaction (anvil's automine: fast, and what tests use).

    Raises:
        AnvilNotFoundError: anvil is not installed (run ``npm ci``).
        AnvilStartError: anvil did not come up.
    """
    with AnvilNode(chain_id=chain_id, extra_args=anvil_args) as node:
        chain = deploy_devchain(node.client, payers=payers, mint_atomic=mint_atomic)
        node.set_block_time(block_time_s)
        yield chain
