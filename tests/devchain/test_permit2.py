"""DevPermit2 and x402's two proxies at their canonical addresses, on a real anvil node: the addresses, the
EIP-712 domain and witness types the x402 SDK signs for, signatures in both ECDSA forms, unordered nonces, and
that only the spender a payer signed may use a permit."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from eth_abi.abi import decode
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from x402.mechanisms.evm.constants import (
    PERMIT2_ADDRESS,
    PERMIT2_WITNESS_TYPES,
    UPTO_PERMIT2_WITNESS_TYPES,
    X402_EXACT_PERMIT2_PROXY_ADDRESS,
    X402_UPTO_PERMIT2_PROXY_ADDRESS,
)

from a2a_x402.devchain import DevChain, encode_call, load_artifact
from tests.devchain.permit2_sdk import (
    EXACT,
    PERMIT2,
    RELAYER,
    RELAYER_KEY,
    STRANGER,
    UPTO,
    permit2_payer,
    permit_of,
    refusal,
    requirements,
    send,
    sign,
)

# Permit2's own prefix of every witness type: the spender's witness type string completes it.
WITNESS_PREFIX = (
    "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,"
)
PERMIT_TYPES = {
    "PermitTransferFrom": [
        {"name": "permitted", "type": "TokenPermissions"},
        {"name": "spender", "type": "address"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"},
    ],
    "TokenPermissions": [{"name": "token", "type": "address"}, {"name": "amount", "type": "uint256"}],
}
AMOUNT = 3 * 10**17


def encode_type(primary: str, types: dict[str, list[dict[str, str]]]) -> str:
    """EIP-712 `encodeType`: the primary type, then the types it references in name order (one level deep,
    which is all these types have)."""
    referenced = sorted({field["type"] for field in types[primary] if field["type"] in types})

    def one(name: str) -> str:
        return name + "(" + ",".join(field["type"] + " " + field["name"] for field in types[name]) + ")"

    return "".join(one(name) for name in [primary, *referenced])


def view(chain: DevChain, address: str, signature: str, returns: str) -> Any:
    (value,) = decode([returns], chain.rpc.eth_call(address, encode_call(signature)))
    return value


def domain(chain: DevChain) -> dict[str, Any]:
    """Permit2's EIP-712 domain as the x402 SDK builds it: a name and no version."""
    return {"name": "Permit2", "chainId": chain.chain_id, "verifyingContract": PERMIT2_ADDRESS}


def permit_message(asset: str, spender: str, nonce: int, deadline: int) -> dict[str, Any]:
    return {
        "permitted": {"token": asset, "amount": AMOUNT},
        "spender": spender,
        "nonce": nonce,
        "deadline": deadline,
    }


def signed_permit(
    chain: DevChain, key: str, spender: str, nonce: int, deadline: int = 2**40
) -> tuple[Any, bytes]:
    """A `PermitTransferFrom` of `AMOUNT` of the plain asset signed with `key`: the permit as Permit2 takes
    it, and its signature."""
    message = permit_message(chain.plain_asset, spender, nonce, deadline)
    signature = Account.sign_typed_data(key, domain(chain), PERMIT_TYPES, message).signature
    return ((to_checksum_address(chain.plain_asset), AMOUNT), nonce, deadline), bytes(signature)


def compact(signature: bytes) -> bytes:
    """The EIP-2098 64-byte form of a 65-byte signature: v - 27 in the top bit of s."""
    r, s, v = signature[:32], int.from_bytes(signature[32:64], "big"), signature[64]
    return r + (s | (v - 27) << 255).to_bytes(32, "big")


def test_the_canonical_addresses_hold_the_dev_contracts(chain: DevChain) -> None:
    addresses = (chain.permit2, chain.exact_permit2_proxy, chain.upto_permit2_proxy)
    assert addresses == (PERMIT2_ADDRESS, X402_EXACT_PERMIT2_PROXY_ADDRESS, X402_UPTO_PERMIT2_PROXY_ADDRESS)
    assert (
        chain.rpc.call("eth_getCode", [PERMIT2_ADDRESS, "latest"])
        == load_artifact("DevPermit2").deployed_bytecode
    )
    for address in addresses[1:]:
        assert to_checksum_address(view(chain, address, "PERMIT2()", "address")) == PERMIT2_ADDRESS


def test_the_domain_separator_is_the_one_the_sdk_signs_in(chain: DevChain) -> None:
    message = permit_message(chain.plain_asset, RELAYER, 0, 0)
    header = encode_typed_data(domain(chain), PERMIT_TYPES, message).header
    assert view(chain, PERMIT2_ADDRESS, "DOMAIN_SEPARATOR()", "bytes32") == header


@pytest.mark.parametrize(
    ("address", "types"),
    [
        (X402_EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_WITNESS_TYPES),
        (X402_UPTO_PERMIT2_PROXY_ADDRESS, UPTO_PERMIT2_WITNESS_TYPES),
    ],
    ids=["exact", "upto"],
)
def test_each_proxys_witness_type_is_the_one_the_sdk_signs(
    chain: DevChain, address: str, types: dict[str, list[dict[str, str]]]
) -> None:
    type_string = view(chain, address, "WITNESS_TYPE_STRING()", "string")
    assert WITNESS_PREFIX + type_string == encode_type("PermitWitnessTransferFrom", types)
    assert view(chain, address, "WITNESS_TYPEHASH()", "bytes32") == keccak(text=encode_type("Witness", types))


@pytest.mark.parametrize("form", ["65 bytes", "64 bytes"])
def test_a_permit_pays_its_spender_once(chain: DevChain, form: str) -> None:
    payer_key = permit2_payer(chain, chain.plain_asset, 10**18)
    payer, payee = Account.from_key(payer_key).address, Account.create().address
    nonce = (7 << 8) | 255  # the last bit of the bitmap's eighth word
    permit, signature = signed_permit(chain, payer_key, RELAYER, nonce)
    args = [permit, (payee, AMOUNT - 1), payer, signature if form == "65 bytes" else compact(signature)]

    send(chain, RELAYER_KEY, PERMIT2, "permitTransferFrom", args)

    assert chain.balance_of(payee, asset=chain.plain_asset) == AMOUNT - 1
    assert chain.balance_of(payer, asset=chain.plain_asset) == 10**18 - AMOUNT + 1
    assert chain.permit2_nonce_used(payer, nonce)
    assert not chain.permit2_nonce_used(payer, nonce - 1)
    assert refusal(chain, RELAYER, PERMIT2, "permitTransferFrom", args) == "InvalidNonce"


def test_a_permit_is_refused_to_anyone_but_its_spender_and_beyond_its_terms(chain: DevChain) -> None:
    payer_key = permit2_payer(chain, chain.plain_asset, 10**18)
    payer, payee = Account.from_key(payer_key).address, Account.create().address
    permit, signature = signed_permit(chain, payer_key, RELAYER, secrets.randbits(256))

    def refused(sender: str, details: tuple[str, int], sig: bytes = signature, terms: Any = permit) -> str:
        return refusal(chain, sender, PERMIT2, "permitTransferFrom", [terms, details, payer, sig])

    # Permit2 takes the caller as the spender: anyone else's call checks a message the payer never signed.
    assert refused(STRANGER, (STRANGER, AMOUNT)) == "InvalidSigner"
    assert refused(RELAYER, (payee, AMOUNT + 1)) == "InvalidAmount(uint256)"
    assert refused(RELAYER, (payee, AMOUNT), signature[:63]) == "InvalidSignatureLength"
    assert refused(RELAYER, (payee, AMOUNT), signature[:64] + b"\x05") == "InvalidSignature"
    expired, expired_signature = signed_permit(chain, payer_key, RELAYER, 1, deadline=1)
    assert refused(RELAYER, (payee, AMOUNT), expired_signature, expired) == "SignatureExpired(uint256)"
    assert chain.balance_of(payer, asset=chain.plain_asset) == 10**18


def test_a_payer_can_spend_nonces_before_any_permit_uses_them(chain: DevChain) -> None:
    payer_key = permit2_payer(chain, chain.plain_asset, 10**18)
    payer = Account.from_key(payer_key).address
    nonce = (3 << 8) | 17
    permit, signature = signed_permit(chain, payer_key, RELAYER, nonce)

    receipt = send(chain, payer_key, PERMIT2, "invalidateUnorderedNonces", [3, 1 << 17])

    assert chain.permit2_nonce_used(payer, nonce)
    (log,) = receipt["logs"]
    assert log["topics"][0] == "0x" + keccak(text="UnorderedNonceInvalidation(address,uint256,uint256)").hex()
    args = [permit, (RELAYER, AMOUNT), payer, signature]
    assert refusal(chain, RELAYER, PERMIT2, "permitTransferFrom", args) == "InvalidNonce"


def test_each_node_runs_permit2_and_both_proxies(node_chain: DevChain) -> None:
    chain = node_chain
    payer_key = permit2_payer(chain, chain.plain_asset, 3_000)
    pay_to = Account.create().address
    exact = sign(payer_key, requirements(chain, "exact", chain.plain_asset, 1_000, pay_to))
    upto = sign(payer_key, requirements(chain, "upto", chain.plain_asset, 2_000, pay_to))
    permit, owner, witness, signature = permit_of(upto)

    send(chain, RELAYER_KEY, EXACT, "settle", list(permit_of(exact)))
    send(chain, RELAYER_KEY, UPTO, "settle", [permit, 1_500, owner, witness, signature])

    assert chain.balance_of(pay_to, asset=chain.plain_asset) == 2_500
