"""x402 `upto` on the dev chain: a maximum the x402 SDK's own upto client signs, settled through the upto
proxy at its canonical address with the SDK's own ABIs: any nonzero amount up to the maximum, once, to the
signed payee, and only by the facilitator the payer named."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account
from x402.mechanisms.evm.constants import X402_UPTO_PERMIT2_PROXY_ADDRESS

from a2a_x402.devchain import DevChain
from tests.devchain.permit2_sdk import (
    RELAYER,
    RELAYER_KEY,
    STRANGER,
    UPTO,
    UPTO_WITH_PERMIT,
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

MAXIMUM = 1_000_000
HELD = 3 * MAXIMUM


def signed(chain: DevChain, asset: str, **options: Any) -> tuple[str, str, list[Any]]:
    """A payer holding `HELD` of `asset` who approved Permit2, a fresh payee, and the SDK's upto payload of at
    most `MAXIMUM` from one to the other, as `(permit, owner, witness, signature)`."""
    payer_key = permit2_payer(chain, asset, HELD)
    pay_to = Account.create().address
    payload = sign(payer_key, requirements(chain, "upto", asset, MAXIMUM, pay_to, **options))
    assert payload["permit2Authorization"]["spender"] == X402_UPTO_PERMIT2_PROXY_ADDRESS
    return Account.from_key(payer_key).address, pay_to, list(permit_of(payload))


def with_amount(signed_args: list[Any], amount: int) -> list[Any]:
    """`settle`'s arguments: the amount to charge goes after the permit."""
    permit, owner, witness, signature = signed_args
    return [permit, amount, owner, witness, signature]


@pytest.mark.parametrize("amount", [1, 377_123, MAXIMUM])
def test_upto_charges_the_amount_used_up_to_the_maximum(chain: DevChain, amount: int) -> None:
    payer, pay_to, args = signed(chain, chain.plain_asset)

    send(chain, RELAYER_KEY, UPTO, "settle", with_amount(args, amount))

    assert chain.balance_of(pay_to, asset=chain.plain_asset) == amount
    assert chain.balance_of(payer, asset=chain.plain_asset) == HELD - amount
    assert chain.balance_of(X402_UPTO_PERMIT2_PROXY_ADDRESS, asset=chain.plain_asset) == 0
    assert chain.permit2_nonce_used(payer, args[0][1])


def test_upto_refuses_more_than_the_maximum_and_nothing(chain: DevChain) -> None:
    payer, _, args = signed(chain, chain.plain_asset)

    assert refusal(chain, RELAYER, UPTO, "settle", with_amount(args, MAXIMUM + 1)) == "AmountExceedsPermitted"
    assert refusal(chain, RELAYER, UPTO, "settle", with_amount(args, 0)) == "InvalidAmount"
    assert not chain.permit2_nonce_used(payer, args[0][1])


def test_an_upto_authorization_settles_once(chain: DevChain) -> None:
    _, pay_to, args = signed(chain, chain.plain_asset)
    send(chain, RELAYER_KEY, UPTO, "settle", with_amount(args, 400_000))

    # What is left under the maximum cannot be charged with the same signature.
    assert refusal(chain, RELAYER, UPTO, "settle", with_amount(args, 600_000)) == "InvalidNonce"
    assert chain.balance_of(pay_to, asset=chain.plain_asset) == 400_000


def test_only_the_facilitator_the_payer_named_may_settle(chain: DevChain) -> None:
    _, pay_to, args = signed(chain, chain.plain_asset)
    permit, owner, (to, facilitator, valid_after), signature = args
    assert facilitator == RELAYER

    assert refusal(chain, STRANGER, UPTO, "settle", with_amount(args, 1)) == "UnauthorizedFacilitator"
    # Naming itself in the witness gets the stranger past the proxy, and Permit2 then finds the signature
    # does not cover that witness.
    forged = [permit, 1, owner, (to, STRANGER, valid_after), signature]
    assert refusal(chain, STRANGER, UPTO, "settle", forged) == "InvalidSigner"
    assert chain.balance_of(pay_to, asset=chain.plain_asset) == 0


def test_upto_pays_only_the_signed_payee(chain: DevChain) -> None:
    _, _, (permit, owner, (_, facilitator, valid_after), signature) = signed(chain, chain.plain_asset)
    redirected = [permit, 1, owner, (RELAYER, facilitator, valid_after), signature]

    assert refusal(chain, RELAYER, UPTO, "settle", redirected) == "InvalidSigner"


def test_upto_refuses_an_expired_authorization(chain: DevChain) -> None:
    _, _, args = signed(chain, chain.plain_asset, timeout_s=30)
    expire(chain, args[0][2])

    assert refusal(chain, RELAYER, UPTO, "settle", with_amount(args, 1)) == "SignatureExpired(uint256)"


def test_upto_with_an_eip2612_permit_charges_part_and_leaves_the_rest_approved(chain: DevChain) -> None:
    payer_key = permit2_payer(chain, chain.permit_asset, HELD, approved=False)
    payer, pay_to = Account.from_key(payer_key).address, Account.create().address
    asked = requirements(chain, "upto", chain.permit_asset, MAXIMUM, pay_to)
    payload = sign(payer_key, asked, eip2612_on=chain)
    permit, owner, witness, signature = permit_of(payload)
    args = [eip2612_permit_of(payload), permit, 250_000, owner, witness, signature]

    assert refusal(chain, STRANGER, UPTO_WITH_PERMIT, "settleWithPermit", args) == "UnauthorizedFacilitator"
    send(chain, RELAYER_KEY, UPTO_WITH_PERMIT, "settleWithPermit", args)

    assert chain.balance_of(pay_to, asset=chain.permit_asset) == 250_000
    assert chain.balance_of(payer, asset=chain.permit_asset) == HELD - 250_000
    assert int(chain.rpc.call("eth_getBalance", [payer, "latest"]), 16) == 0
    assert allowance(chain, chain.permit_asset, payer) == MAXIMUM - 250_000
    # Relayed again, the spent EIP-2612 permit fails quietly and Permit2 refuses the spent nonce.
    assert refusal(chain, RELAYER, UPTO_WITH_PERMIT, "settleWithPermit", args) == "InvalidNonce"
