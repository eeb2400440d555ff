"""x402 `exact` through Permit2 on the dev chain: payments the x402 SDK's own exact client signs
(`assetTransferMethod: "permit2"`), settled by a relayer through the exact proxy at its canonical address
with the SDK's own ABIs, for tokens without EIP-3009: the signed amount to the signed payee, once."""

from __future__ import annotations

from typing import Any

import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_utils.crypto import keccak
from x402.mechanisms.evm.constants import X402_EXACT_PERMIT2_PROXY_ADDRESS

from a2a_x402.devchain import DevChain
from tests.devchain.permit2_sdk import (
    EXACT,
    EXACT_WITH_PERMIT,
    PERMIT2,
    RELAYER,
    RELAYER_KEY,
    STRANGER,
    allowance,
    eip2612_permit_of,
    expire,
    permit2_payer,
    permit_of,
    refusal,
    requirements,
    send,
    sign,
)

SETTLED = "0x" + keccak(text="Settled()").hex()


def signed(chain: DevChain, asset: str, amount: int, **options: Any) -> tuple[str, str, dict[str, Any]]:
    """A payer holding `5 * amount` of `asset` who approved Permit2, a fresh payee, and the SDK's payload of
    `amount` from one to the other."""
    payer_key = permit2_payer(chain, asset, 5 * amount)
    pay_to = Account.create().address
    return payer_key, pay_to, sign(payer_key, requirements(chain, "exact", asset, amount, pay_to, **options))


@pytest.mark.parametrize("asset_field", ["plain_asset", "permit_asset"])
def test_exact_pays_the_signed_amount_to_the_signed_payee(chain: DevChain, asset_field: str) -> None:
    asset = getattr(chain, asset_field)
    payer_key, pay_to, payload = signed(chain, asset, 1_250_000)
    payer = Account.from_key(payer_key).address
    assert payload["permit2Authorization"]["spender"] == X402_EXACT_PERMIT2_PROXY_ADDRESS
    permit, owner, witness, signature = permit_of(payload)

    receipt = send(chain, RELAYER_KEY, EXACT, "settle", [permit, owner, witness, signature])

    assert chain.balance_of(pay_to, asset=asset) == 1_250_000
    assert chain.balance_of(payer, asset=asset) == 4 * 1_250_000
    assert chain.balance_of(X402_EXACT_PERMIT2_PROXY_ADDRESS, asset=asset) == 0
    assert chain.permit2_nonce_used(payer, permit[1])
    settled = [log for log in receipt["logs"] if log["topics"][0] == SETTLED]
    assert [log["address"].lower() for log in settled] == [X402_EXACT_PERMIT2_PROXY_ADDRESS.lower()]


def test_an_exact_payment_settles_once(chain: DevChain) -> None:
    payer_key, pay_to, payload = signed(chain, chain.plain_asset, 10**18)
    args = list(permit_of(payload))
    send(chain, RELAYER_KEY, EXACT, "settle", args)

    assert refusal(chain, RELAYER, EXACT, "settle", args) == "InvalidNonce"
    assert chain.balance_of(pay_to, asset=chain.plain_asset) == 10**18


def test_exact_refuses_terms_the_payer_did_not_sign(chain: DevChain) -> None:
    _, _, payload = signed(chain, chain.plain_asset, 10**18)
    ((token, amount), nonce, deadline), owner, (to, valid_after), signature = permit_of(payload)

    def refused(terms: Any, witness: Any) -> str:
        return refusal(chain, RELAYER, EXACT, "settle", [terms, owner, witness, signature])

    assert refused(((token, amount), nonce, deadline), (STRANGER, valid_after)) == "InvalidSigner"
    assert refused(((token, amount + 1), nonce, deadline), (to, valid_after)) == "InvalidSigner"
    assert refused(((token, amount), nonce, deadline + 1), (to, valid_after)) == "InvalidSigner"
    # The proxy's own checks come before Permit2's.
    assert refused(((token, 0), nonce, deadline), (to, valid_after)) == "InvalidAmount"
    assert refused(((token, amount), nonce, deadline), (to, 2**40)) == "PaymentTooEarly"
    assert (
        refused(((token, amount), nonce, deadline), ("0x" + "00" * 20, valid_after)) == "InvalidDestination"
    )


def test_exact_refuses_an_expired_permit(chain: DevChain) -> None:
    _, _, payload = signed(chain, chain.plain_asset, 10**18, timeout_s=30)
    args = list(permit_of(payload))
    expire(chain, args[0][2])

    assert refusal(chain, RELAYER, EXACT, "settle", args) == "SignatureExpired(uint256)"


def test_exact_needs_the_payers_approval_of_permit2(chain: DevChain) -> None:
    payer_key = permit2_payer(chain, chain.plain_asset, 10**18, approved=False)
    payload = sign(payer_key, requirements(chain, "exact", chain.plain_asset, 10**18, STRANGER))

    assert refusal(chain, RELAYER, EXACT, "settle", list(permit_of(payload))) == "TRANSFER_FROM_FAILED"


def test_a_relayer_cannot_go_around_the_proxy_to_pay_itself(chain: DevChain) -> None:
    _, _, payload = signed(chain, chain.plain_asset, 10**18)
    permit, owner, (to, valid_after), signature = permit_of(payload)
    # The very witness the payer signed, hashed as the proxy hashes it.
    witness_type = "Witness(address to,uint256 validAfter)"
    witness = keccak(encode(["bytes32", "address", "uint256"], [keccak(text=witness_type), to, valid_after]))
    type_string = "Witness witness)TokenPermissions(address token,uint256 amount)" + witness_type
    args = [permit, (RELAYER, 10**18), owner, witness, type_string, signature]

    # Permit2 takes its caller as the spender, and the payer named the proxy.
    assert refusal(chain, RELAYER, PERMIT2, "permitWitnessTransferFrom", args) == "InvalidSigner"


def test_exact_with_an_eip2612_permit_pays_for_a_payer_with_no_eth(chain: DevChain) -> None:
    payer_key = permit2_payer(chain, chain.permit_asset, 2_000_000, approved=False)
    payer, pay_to = Account.from_key(payer_key).address, Account.create().address
    asked = requirements(chain, "exact", chain.permit_asset, 2_000_000, pay_to)
    payload = sign(payer_key, asked, eip2612_on=chain)
    args = [eip2612_permit_of(payload), *permit_of(payload)]

    send(chain, RELAYER_KEY, EXACT_WITH_PERMIT, "settleWithPermit", args)

    assert chain.balance_of(pay_to, asset=chain.permit_asset) == 2_000_000
    assert chain.balance_of(payer, asset=chain.permit_asset) == 0
    assert allowance(chain, chain.permit_asset, payer) == 0
    assert int(chain.rpc.call("eth_getBalance", [payer, "latest"]), 16) == 0


def test_exact_refuses_an_eip2612_permit_for_another_amount(chain: DevChain) -> None:
    payer_key = permit2_payer(chain, chain.permit_asset, 2_000_000, approved=False)
    asked = requirements(chain, "exact", chain.permit_asset, 1_000_000, STRANGER)
    payload = sign(payer_key, asked, eip2612_on=chain)
    value, *rest = eip2612_permit_of(payload)
    args = [(value + 1, *rest), *permit_of(payload)]

    assert refusal(chain, RELAYER, EXACT_WITH_PERMIT, "settleWithPermit", args) == "Permit2612AmountMismatch"


def test_a_failing_eip2612_permit_is_logged_and_an_existing_approval_still_pays(chain: DevChain) -> None:
    payer_key, pay_to, payload = signed(chain, chain.permit_asset, 1_000_000)
    payer = Account.from_key(payer_key).address
    # The SDK signs no EIP-2612 permit for a payer who approved Permit2 already; a relayer may still send one.
    unusable = (1_000_000, 2**40, bytes(32), bytes(32), 0)  # v = 0: the token's permit reverts

    receipt = send(chain, RELAYER_KEY, EXACT_WITH_PERMIT, "settleWithPermit", [unusable, *permit_of(payload)])

    failed = "0x" + keccak(text="EIP2612PermitFailedWithData(address,address,bytes)").hex()
    assert [log["topics"][0] for log in receipt["logs"]].count(failed) == 1
    assert chain.balance_of(pay_to, asset=chain.permit_asset) == 1_000_000
    assert chain.balance_of(payer, asset=chain.permit_asset) == 4_000_000
