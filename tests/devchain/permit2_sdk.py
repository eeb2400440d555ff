"""Helpers for the tests that pay through the dev chain's Permit2 and x402 proxies, signed by the x402 Python
SDK's own client schemes, unmodified, and settled with the SDK's own proxy ABIs."""

from __future__ import annotations

from typing import Any

import pytest
from eth_abi.abi import decode
from eth_account import Account
from eth_utils.abi import function_signature_to_4byte_selector
from web3 import Web3
from web3.contract import Contract
from x402.extensions.eip2612_gas_sponsoring import EIP2612_GAS_SPONSORING_KEY
from x402.mechanisms.evm import EthAccountSigner, EthAccountSignerWithRPC
from x402.mechanisms.evm.constants import (
    X402_EXACT_PERMIT2_PROXY_ABI,
    X402_EXACT_PERMIT2_PROXY_ADDRESS,
    X402_EXACT_PERMIT2_PROXY_SETTLE_WITH_PERMIT_ABI,
    X402_UPTO_PERMIT2_PROXY_ABI,
    X402_UPTO_PERMIT2_PROXY_ADDRESS,
    X402_UPTO_PERMIT2_PROXY_SETTLE_WITH_PERMIT_ABI,
)
from x402.mechanisms.evm.exact import ExactEvmScheme
from x402.mechanisms.evm.upto import UptoEvmScheme
from x402.schemas import PaymentRequirements

from a2a_x402.devchain import (
    ANVIL_DEV_KEYS,
    PERMIT2_ADDRESS,
    PERMIT_ASSET_NAME,
    PERMIT_ASSET_VERSION,
    DevChain,
    RpcError,
    encode_call,
    load_artifact,
)

# The relayer settles; for upto it is also the facilitator the payer names in the witness.
RELAYER_KEY = ANVIL_DEV_KEYS[1]
RELAYER = Account.from_key(RELAYER_KEY).address
# Another funded account: a stranger to every payment.
STRANGER_KEY = ANVIL_DEV_KEYS[3]
STRANGER = Account.from_key(STRANGER_KEY).address

_OFFLINE = Web3()


def proxy(address: str, abi: list[dict[str, Any]]) -> Contract:
    """The contract at ``address`` as ``abi`` describes it (only for encoding calls)."""
    return _OFFLINE.eth.contract(address=Web3.to_checksum_address(address), abi=abi)


# The canonical contracts as the SDK's ABIs describe them (ours for Permit2: the SDK carries none).
PERMIT2 = proxy(PERMIT2_ADDRESS, load_artifact("DevPermit2").abi)
EXACT = proxy(X402_EXACT_PERMIT2_PROXY_ADDRESS, X402_EXACT_PERMIT2_PROXY_ABI)
EXACT_WITH_PERMIT = proxy(X402_EXACT_PERMIT2_PROXY_ADDRESS, X402_EXACT_PERMIT2_PROXY_SETTLE_WITH_PERMIT_ABI)
UPTO = proxy(X402_UPTO_PERMIT2_PROXY_ADDRESS, X402_UPTO_PERMIT2_PROXY_ABI)
UPTO_WITH_PERMIT = proxy(X402_UPTO_PERMIT2_PROXY_ADDRESS, X402_UPTO_PERMIT2_PROXY_SETTLE_WITH_PERMIT_ABI)


def _error_names() -> dict[str, str]:
    """Custom error selectors (``0x`` + 8 hex) of the dev chain's Permit2 contracts, to their names (with
    their argument types, for an error that has arguments)."""
    names: dict[str, str] = {}
    for contract in ("DevPermit2", "DevExactPermit2Proxy", "DevUptoPermit2Proxy"):
        for item in load_artifact(contract).abi:
            if item["type"] == "error":
                signature = f"{item['name']}({','.join(i['type'] for i in item['inputs'])})"
                # Permit2's InvalidAmount(uint256) and the proxies' InvalidAmount() differ by their arguments.
                name = signature if item["inputs"] else item["name"]
                names["0x" + function_signature_to_4byte_selector(signature).hex()] = name
    return names


_ERRORS = _error_names()


def permit2_payer(chain: DevChain, asset: str, amount_atomic: int, *, approved: bool = True) -> str:
    """A fresh payer's key holding ``amount_atomic`` of ``asset``; ``approved``: it approved Permit2."""
    key = str(Account.create().key.to_0x_hex())
    chain.mint(Account.from_key(key).address, amount_atomic, asset=asset)
    if approved:
        chain.approve_permit2(key, asset)
    return key


def allowance(chain: DevChain, asset: str, owner: str) -> int:
    """How much of ``owner``'s ``asset`` Permit2 may still move."""
    data = encode_call("allowance(address,address)", [owner, PERMIT2_ADDRESS])
    (value,) = decode(["uint256"], chain.rpc.eth_call(asset, data))
    return int(value)


def requirements(
    chain: DevChain, scheme: str, asset: str, amount: int, pay_to: str, *, timeout_s: int = 120
) -> PaymentRequirements:
    """What a server asks for: ``amount`` of ``asset`` to ``pay_to`` through Permit2 (``exact`` with
    ``assetTransferMethod: "permit2"``, or ``upto`` naming the relayer as facilitator)."""
    extra: dict[str, Any] = {"assetTransferMethod": "permit2"} if scheme == "exact" else {}
    if scheme == "upto":
        extra["facilitatorAddress"] = RELAYER
    if asset == chain.permit_asset:
        extra |= {"name": PERMIT_ASSET_NAME, "version": PERMIT_ASSET_VERSION}
    return PaymentRequirements(
        scheme=scheme,
        network=chain.network,
        asset=asset,
        amount=str(amount),
        pay_to=pay_to,
        max_timeout_seconds=timeout_s,
        extra=extra,
    )


def sign(key: str, asked: PaymentRequirements, *, eip2612_on: DevChain | None = None) -> dict[str, Any]:
    """The payload the SDK's client scheme for ``asked.scheme`` signs with ``key``; with ``eip2612_on``, the
    SDK reads the payer's token nonce from that chain and adds its EIP-2612 approval of Permit2."""
    account = Account.from_key(key)
    signer = (
        EthAccountSigner(account)
        if eip2612_on is None
        else EthAccountSignerWithRPC(account, eip2612_on.rpc_url)
    )
    scheme = ExactEvmScheme(signer) if asked.scheme == "exact" else UptoEvmScheme(signer)
    extensions: dict[str, Any] | None = None if eip2612_on is None else {EIP2612_GAS_SPONSORING_KEY: {}}
    payload: dict[str, Any] = scheme.create_payment_payload(asked, extensions)
    return payload


def permit_of(payload: dict[str, Any]) -> tuple[Any, ...]:
    """``(permit, owner, witness, signature)`` of a signed payload, as the proxies' ``settle`` takes them."""
    auth = payload["permit2Authorization"]
    permitted = (Web3.to_checksum_address(auth["permitted"]["token"]), int(auth["permitted"]["amount"]))
    permit = (permitted, int(auth["nonce"]), int(auth["deadline"]))
    w = auth["witness"]
    witness: tuple[Any, ...] = (w["to"], int(w["validAfter"]))
    if "facilitator" in w:
        witness = (w["to"], w["facilitator"], int(w["validAfter"]))
    return permit, auth["from"], witness, bytes.fromhex(payload["signature"].removeprefix("0x"))


def eip2612_permit_of(payload: dict[str, Any]) -> tuple[int, int, bytes, bytes, int]:
    """The SDK's EIP-2612 extension of a payload as a proxy's ``EIP2612Permit`` (value, deadline, r, s, v)."""
    info = payload["__extensions"][EIP2612_GAS_SPONSORING_KEY]["info"]
    signature = bytes.fromhex(info["signature"].removeprefix("0x"))
    return int(info["amount"]), int(info["deadline"]), signature[:32], signature[32:64], signature[64]


def calldata(contract: Contract, function: str, args: list[Any]) -> bytes:
    """``function(*args)`` of ``contract`` ABI-encoded."""
    return bytes.fromhex(contract.encode_abi(function, args=args).removeprefix("0x"))


def send(chain: DevChain, key: str, contract: Contract, function: str, args: list[Any]) -> dict[str, Any]:
    """Send ``function(*args)`` to ``contract`` from ``key`` and return the receipt of its success."""
    return chain.rpc.transact(key, to=contract.address, data=calldata(contract, function, args))


def refusal(chain: DevChain, sender: str, contract: Contract, function: str, args: list[Any]) -> str:
    """The custom error's name (or the revert string) ``function(*args)`` from ``sender`` reverts with."""
    call = {"from": sender, "to": contract.address, "data": "0x" + calldata(contract, function, args).hex()}
    with pytest.raises(RpcError) as excinfo:
        chain.rpc.call("eth_call", [call, "latest"])
    data = excinfo.value.data
    if isinstance(data, str) and data[:10] in _ERRORS:
        return _ERRORS[data[:10]]
    return excinfo.value.revert_reason or excinfo.value.rpc_message


def expire(chain: DevChain, deadline: int) -> None:
    """Mine a block one second past ``deadline``, so calls at the latest block find a permit expired."""
    chain.rpc.call("evm_setNextBlockTimestamp", [deadline + 1])
    chain.rpc.call("evm_mine")
