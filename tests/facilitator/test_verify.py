"""Verification: every bad payment is refused with its exact reason, by verify and by settle alike, and
nothing is broadcast or claimed for it; good payments (EOA and ERC-1271 wallets) pass, changing nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from eth_account import Account
from eth_utils.crypto import keccak

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ClaimState, Facilitator
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements, Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.fiat_token import ASSETS

from .conftest import OpenFacilitator
from .payments import (
    cancel_authorization,
    claim_rows,
    deploy_gas_burning_wallet,
    high_s,
    relayer_nonce,
    sign_exact,
    submit_directly,
    tampered,
)

AMOUNT = 1_500_000
OTHER = "0x1111111111111111111111111111111111111111"  # an address without code
ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"


@dataclass(frozen=True)
class Case:
    """A bad payment: how to build it from a funded payer key, and the reason it must be refused with."""

    build: Callable[[DevChain, str], tuple[PaymentPayload, PaymentRequirements]]
    reason: Reason


def _signed(chain: DevChain, key: str, **message: Any) -> tuple[PaymentPayload, PaymentRequirements]:
    requirements = make_requirements(chain)
    return sign_exact(key, requirements, **message), requirements


def _retargeted(chain: DevChain, key: str, **changes: Any) -> tuple[PaymentPayload, PaymentRequirements]:
    """Signed for the dev chain's requirements, then the requirements (and the authorization) changed."""
    original = make_requirements(chain)
    payload = sign_exact(key, original)
    requirements = make_requirements(chain, **changes)
    changed = tampered(payload, to=requirements.pay_to, value=requirements.amount)
    return changed.model_copy(update={"accepted": requirements}), requirements


def _tampered(chain: DevChain, key: str, **changes: Any) -> tuple[PaymentPayload, PaymentRequirements]:
    payload, requirements = _signed(chain, key)
    return tampered(payload, **changes), requirements


def _wrong_signer(chain: DevChain, key: str) -> tuple[PaymentPayload, PaymentRequirements]:
    requirements = make_requirements(chain)
    other_key = Account.create().key.to_0x_hex()
    return sign_exact(key, requirements, signer_key=other_key), requirements


def _with_requirements(
    chain: DevChain, key: str, **changes: object
) -> tuple[PaymentPayload, PaymentRequirements]:
    """Signed consistently for requirements that differ from the dev chain's in `changes`."""
    requirements = make_requirements(chain, **changes)
    return sign_exact(key, requirements), requirements


def _used_nonce(chain: DevChain, key: str) -> tuple[PaymentPayload, PaymentRequirements]:
    requirements = make_requirements(chain, amount=AMOUNT // 2)
    first = sign_exact(key, requirements)
    submit_directly(chain, first)
    # The same nonce again, freshly signed for the full amount: only the chain knows it is spent.
    requirements = make_requirements(chain)
    return sign_exact(
        key, requirements, nonce=bytes.fromhex(first.payload.authorization.nonce[2:])
    ), requirements


def _cancelled_nonce(chain: DevChain, key: str) -> tuple[PaymentPayload, PaymentRequirements]:
    payload, requirements = _signed(chain, key)
    cancel_authorization(chain, key, payload.payload.authorization.nonce)
    return payload, requirements


def _poor_payer(chain: DevChain, _key: str) -> tuple[PaymentPayload, PaymentRequirements]:
    return _signed(chain, chain.new_payer(AMOUNT - 1))


def _high_s(chain: DevChain, key: str) -> tuple[PaymentPayload, PaymentRequirements]:
    payload, requirements = _signed(chain, key)
    return tampered(payload, signature=high_s(payload.payload.signature)), requirements


def _accepted_differs(chain: DevChain, key: str) -> tuple[PaymentPayload, PaymentRequirements]:
    payload, requirements = _signed(chain, key)
    return payload.model_copy(
        update={"accepted": make_requirements(chain, max_timeout_seconds=60)}
    ), requirements


def _accepted_other(chain: DevChain, key: str, **changes: Any) -> tuple[PaymentPayload, PaymentRequirements]:
    payload, requirements = _signed(chain, key)
    return payload.model_copy(update={"accepted": make_requirements(chain, **changes)}), requirements


def _accepted_other_network(chain: DevChain, key: str) -> tuple[PaymentPayload, PaymentRequirements]:
    payload, requirements = _signed(chain, key)
    return payload.model_copy(update={"accepted": make_requirements(chain, network="eip155:1")}), requirements


SIGNATURE = Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE
SIMULATION_FAILED = Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED
CASES = {
    "wrong signer": Case(_wrong_signer, SIGNATURE),
    "value tampered with (amount too)": Case(lambda c, k: _retargeted(c, k, amount=AMOUNT * 2), SIGNATURE),
    "to tampered with (payTo too)": Case(lambda c, k: _retargeted(c, k, pay_to=OTHER), SIGNATURE),
    "nonce tampered with": Case(lambda c, k: _tampered(c, k, nonce="0x" + "ab" * 32), SIGNATURE),
    "validBefore tampered with": Case(
        lambda c, k: _tampered(c, k, valid_before=int(time.time()) + 3600), SIGNATURE
    ),
    "value below the amount": Case(
        lambda c, k: _signed(c, k, value=AMOUNT - 1),
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH,
    ),
    "value above the amount": Case(
        lambda c, k: _signed(c, k, value=AMOUNT + 1),
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH,
    ),
    "to is not payTo": Case(
        lambda c, k: _signed(c, k, to=OTHER), Reason.INVALID_EXACT_EVM_PAYLOAD_RECIPIENT_MISMATCH
    ),
    "expired": Case(
        lambda c, k: _signed(c, k, valid_before=int(time.time()) - 1),
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE,
    ),
    "expiring within the settlement margin": Case(
        lambda c, k: _signed(c, k, valid_before=int(time.time()) + 3),
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE,
    ),
    "not yet valid": Case(
        lambda c, k: _signed(c, k, valid_after=int(time.time()) + 3600),
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER,
    ),
    "domain of another chain id": Case(lambda c, k: _signed(c, k, domain={"chainId": 1}), SIGNATURE),
    "domain of another token": Case(
        lambda c, k: _signed(c, k, domain={"verifyingContract": OTHER}), SIGNATURE
    ),
    "wrong token name": Case(
        lambda c, k: _with_requirements(c, k, extra={"name": "USD Coin", "version": "2"}),
        Reason.INVALID_EXACT_EVM_TOKEN_NAME_MISMATCH,
    ),
    "wrong token version": Case(
        lambda c, k: _with_requirements(c, k, extra={"name": "USDC", "version": "1"}),
        Reason.INVALID_EXACT_EVM_TOKEN_VERSION_MISMATCH,
    ),
    "no token domain in extra": Case(
        lambda c, k: _with_requirements(c, k, extra=None), Reason.MISSING_EIP712_DOMAIN
    ),
    "asset is an EOA": Case(
        lambda c, k: _with_requirements(c, k, asset=OTHER), Reason.ASSET_NOT_DEPLOYED_CONTRACT
    ),
    "asset is a contract without EIP-3009": Case(
        lambda c, k: _with_requirements(c, k, asset=c.erc1271_wallet),
        Reason.INVALID_EXACT_EVM_EIP3009_NOT_SUPPORTED,
    ),
    "payTo the zero address (only the simulation sees the revert)": Case(
        lambda c, k: _with_requirements(c, k, pay_to=ZERO_ADDRESS),
        Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED,
    ),
    "unknown network": Case(
        lambda c, k: _with_requirements(c, k, network="eip155:1"), Reason.INVALID_NETWORK
    ),
    "unknown scheme": Case(lambda c, k: _with_requirements(c, k, scheme="upto"), Reason.UNSUPPORTED_SCHEME),
    "accepted for another network": Case(_accepted_other_network, Reason.NETWORK_MISMATCH),
    "accepted another maxTimeoutSeconds": Case(_accepted_differs, Reason.INVALID_PAYLOAD),
    "accepted another asset": Case(lambda c, k: _accepted_other(c, k, asset=OTHER), Reason.INVALID_PAYLOAD),
    "accepted another amount (the authorization's value is right)": Case(
        lambda c, k: _accepted_other(c, k, amount=AMOUNT * 2),
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH,
    ),
    "accepted another payTo (the authorization's to is right)": Case(
        lambda c, k: _accepted_other(c, k, pay_to=OTHER), Reason.INVALID_EXACT_EVM_PAYLOAD_RECIPIENT_MISMATCH
    ),
    "nonce already used on chain": Case(_used_nonce, Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED),
    "nonce cancelled": Case(_cancelled_nonce, Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED),
    "balance too low": Case(_poor_payer, Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE),
    "high-s signature": Case(_high_s, SIGNATURE),
}


# The cases that turn on the token's own code, run on Circle's FiatToken v2.2 as well as on DevUSDC.
ON_FIAT_TOKEN = (
    "payTo the zero address (only the simulation sees the revert)",
    "nonce already used on chain",
    "nonce cancelled",
    "balance too low",
)


@pytest.mark.parametrize(
    ("case", "chain"),
    [
        *(pytest.param(case, "DevUSDC", id=name) for name, case in CASES.items()),
        *(pytest.param(CASES[name], "FiatTokenV2_2", id=f"{name}-FiatTokenV2_2") for name in ON_FIAT_TOKEN),
    ],
    indirect=["chain"],
)
async def test_bad_payment_is_refused_with_its_reason_and_never_broadcast(
    case: Case, chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    payload, requirements = case.build(chain, new_payer())
    nonce_before = relayer_nonce(chain)
    payee_before = chain.balance_of(PAY_TO)

    verified = await facilitator.verify(payload, requirements)
    settled = await facilitator.settle(payload, requirements, idempotency_key="bad-payment")

    assert (verified.is_valid, verified.invalid_reason) == (False, case.reason)
    assert verified.invalid_message
    assert verified.payer == payload.payload.authorization.from_address
    assert (settled.success, settled.error_reason, settled.transaction) == (False, case.reason, "")
    assert settled.network == chain.network
    assert relayer_nonce(chain) == nonce_before
    assert chain.balance_of(PAY_TO) == payee_before
    assert await claim_rows(sqlite_url) == []


async def test_an_accepted_mismatch_names_the_fields_that_differ(
    chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str]
) -> None:
    payload, requirements = _accepted_other(chain, new_payer(), asset=OTHER, max_timeout_seconds=60)

    verified = await facilitator.verify(payload, requirements)

    assert (verified.invalid_reason, verified.invalid_message) == (
        Reason.INVALID_PAYLOAD,
        "paymentPayload.accepted differs from the requirements in: asset, maxTimeoutSeconds",
    )


async def test_verify_accepts_a_good_payment_and_changes_nothing(
    chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    key = new_payer()
    requirements = make_requirements(chain)
    payload = sign_payment(key, requirements)
    nonce = bytes.fromhex(payload.payload.authorization.nonce[2:])
    payer = payload.payload.authorization.from_address
    before = (relayer_nonce(chain), chain.balance_of(payer), chain.balance_of(PAY_TO))

    answers = [await facilitator.verify(payload, requirements) for _ in range(3)]

    assert {(a.is_valid, a.invalid_reason, a.payer) for a in answers} == {(True, None, payer)}
    assert (relayer_nonce(chain), chain.balance_of(payer), chain.balance_of(PAY_TO)) == before
    assert chain.authorization_state(payer, nonce) is False
    assert await claim_rows(sqlite_url) == []
    # Verifying consumed nothing: the very same authorization still settles.
    assert (await facilitator.settle(payload, requirements)).success


@pytest.mark.parametrize("chain", ASSETS, indirect=True)
async def test_contract_wallet_payer_verifies_and_settles_through_erc1271(
    chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    requirements = make_requirements(chain)
    wallet = chain.erc1271_wallet
    payload = sign_exact(chain.erc1271_wallet_owner_key, requirements, from_address=wallet)
    wallet_before, payee_before = chain.balance_of(wallet), chain.balance_of(PAY_TO)

    verified = await facilitator.verify(payload, requirements)
    settled = await facilitator.settle(payload, requirements)

    assert (verified.is_valid, verified.payer) == (True, wallet)
    assert (settled.success, settled.payer) == (True, wallet), settled
    assert chain.balance_of(wallet) == wallet_before - requirements.amount
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert [row["state"] for row in await claim_rows(sqlite_url)] == [ClaimState.SUCCEEDED]


async def test_contract_wallet_refuses_a_signature_of_someone_else(
    chain: DevChain, facilitator: Facilitator
) -> None:
    requirements = make_requirements(chain)
    stranger = Account.create().key.to_0x_hex()
    payload = sign_exact(stranger, requirements, from_address=chain.erc1271_wallet)

    verified = await facilitator.verify(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (False, SIGNATURE)


async def test_each_contract_wallet_gets_its_own_gas_estimate(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    """A wallet whose check burns ~260k gas, settled after a cheap one, does not get the cheap one's gas."""
    service = await open_facilitator(sqlite_url, gas_limit_cap=1_000_000)
    requirements = make_requirements(chain)
    cheap = sign_exact(chain.erc1271_wallet_owner_key, requirements, from_address=chain.erc1271_wallet)
    costly_wallet, owner_key = deploy_gas_burning_wallet(chain, cold_reads=124)
    costly = sign_exact(owner_key, requirements, from_address=costly_wallet)

    first = await service.settle(cheap, requirements)
    second = await service.settle(costly, requirements)

    assert first.success, first
    assert second.success, second
    cheap_gas, costly_gas = (
        int(chain.rpc.call("eth_getTransactionReceipt", [answer.transaction])["gasUsed"], 16)
        for answer in (first, second)
    )
    assert costly_gas > cheap_gas + 250_000
    assert chain.authorization_state(costly_wallet, bytes.fromhex(costly.payload.authorization.nonce[2:]))


async def test_a_transfer_costing_more_gas_than_the_cap_is_refused_before_any_claim(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, gas_limit_cap=21_000)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements, idempotency_key="over-the-cap")

    assert (verified.is_valid, verified.invalid_reason) == (
        False,
        Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED,
    )
    assert (settled.success, settled.error_reason, settled.transaction) == (
        False,
        Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED,
        "",
    )
    assert "cap of 21000" in (settled.error_message or "")
    assert (relayer_nonce(chain), chain.balance_of(PAY_TO)) == (nonce_before, payee_before)
    assert await claim_rows(sqlite_url) == []


async def test_a_revert_only_the_simulation_sees_is_refused_once_the_gas_is_known_too(
    chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    """After a first EOA payment the transfer is simulated with a plain eth_call: it still catches reverts."""
    key = new_payer()
    good = make_requirements(chain)
    assert (await facilitator.verify(sign_payment(key, good), good)).is_valid
    requirements = make_requirements(chain, pay_to=ZERO_ADDRESS)
    payload = sign_exact(key, requirements)
    nonce_before = relayer_nonce(chain)

    verified = await facilitator.verify(payload, requirements)
    settled = await facilitator.settle(payload, requirements)

    for reason, message in (
        (verified.invalid_reason, verified.invalid_message),
        (settled.error_reason, settled.error_message),
    ):
        assert reason == Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED
        assert "transfer to the zero address" in (message or "")
    assert (settled.success, settled.transaction) == (False, "")
    assert relayer_nonce(chain) == nonce_before
    assert await claim_rows(sqlite_url) == []


async def test_a_contract_wallet_signature_of_another_length_settles_through_the_bytes_overload(
    chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    wallet, owner_key = deploy_gas_burning_wallet(chain, cold_reads=0)
    requirements = make_requirements(chain)
    signed = sign_exact(owner_key, requirements, from_address=wallet)
    # The wallet's signature format appends a byte of scheme data: 66 bytes, not an (r, s, v) triple.
    payload = tampered(signed, signature=signed.payload.signature + "01")
    wallet_before = chain.balance_of(wallet)

    verified = await facilitator.verify(payload, requirements)
    settled = await facilitator.settle(payload, requirements)

    assert verified.is_valid, verified
    assert settled.success, settled
    sent = chain.rpc.call("eth_getTransactionByHash", [settled.transaction])
    bytes_overload = keccak(
        text="transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )[:4]
    assert sent["input"][:10] == "0x" + bytes_overload.hex()
    assert chain.balance_of(wallet) == wallet_before - requirements.amount
    assert [row["state"] for row in await claim_rows(sqlite_url)] == [ClaimState.SUCCEEDED]


FIATTOKEN_REFUSALS: dict[str, tuple[Callable[[DevChain, str], None], str]] = {
    "payer blacklisted": (lambda chain, payer: chain.set_blacklisted(payer, True), "blacklisted the payer"),
    "payee blacklisted": (lambda chain, _payer: chain.set_blacklisted(PAY_TO, True), "blacklisted the payTo"),
    "token paused": (lambda chain, _payer: chain.set_paused(True), "the token is paused"),
}


@pytest.mark.parametrize("refusal", FIATTOKEN_REFUSALS.values(), ids=FIATTOKEN_REFUSALS.keys())
@pytest.mark.parametrize("payer_kind", ["eoa", "erc1271"])
@pytest.mark.parametrize("chain", ASSETS, indirect=True)
async def test_a_fiattoken_refusal_is_named_at_verify_and_settle_before_any_claim_or_broadcast(
    refusal: tuple[Callable[[DevChain, str], None], str],
    payer_kind: str,
    chain: DevChain,
    facilitator: Facilitator,
    new_payer: Callable[..., str],
    sqlite_url: str,
) -> None:
    refuse, says = refusal
    requirements = make_requirements(chain)
    if payer_kind == "eoa":
        payload = sign_payment(new_payer(), requirements)
    else:
        payload = sign_exact(chain.erc1271_wallet_owner_key, requirements, from_address=chain.erc1271_wallet)
    payer = payload.payload.authorization.from_address
    # A first payment makes the token's domain and an EOA's gas known: the refusal must not depend on it.
    assert (await facilitator.verify(payload, requirements)).is_valid
    refuse(chain, payer)
    nonce_before, payer_before = relayer_nonce(chain), chain.balance_of(payer)

    verified = await facilitator.verify(payload, requirements)
    settled = await facilitator.settle(payload, requirements, idempotency_key="refused")

    assert (verified.is_valid, verified.invalid_reason) == (False, SIMULATION_FAILED)
    assert says in (verified.invalid_message or "")
    assert (settled.success, settled.error_reason, settled.transaction) == (False, SIMULATION_FAILED, "")
    assert says in (settled.error_message or "")
    assert (relayer_nonce(chain), chain.balance_of(payer)) == (nonce_before, payer_before)
    assert await claim_rows(sqlite_url) == []


async def test_a_settlement_retried_after_the_payer_is_blacklisted_gets_its_first_answer(
    chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str]
) -> None:
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    first = await facilitator.settle(payload, requirements, idempotency_key="before-blacklisting")
    assert first.success, first

    chain.set_blacklisted(payload.payload.authorization.from_address, True)
    again = await facilitator.settle(payload, requirements, idempotency_key="before-blacklisting")

    assert (again.success, again.transaction) == (True, first.transaction)
