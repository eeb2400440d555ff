"""ERC-6492 counterfactual wallets: verified by simulating deployment and transfer together, settled by
deploying and paying in one Multicall3 transaction, through the factories the operator lists only; every
malformed or hostile wrapper, and every unlisted factory, is refused with a reason, nothing claimed,
deployed or broadcast. A deployed wallet's wrapped signature is accepted whatever its factory."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from eth_abi.abi import decode, encode
from eth_account import Account

from a2a_x402.devchain import MULTICALL3_ADDRESS, DevChain, encode_call
from a2a_x402.facilitator import ClaimState, Facilitator, FacilitatorSettings
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements, Reason
from tests.fixtures.facilitator import PAY_TO, make_requirements

from .conftest import OpenFacilitator
from .payments import (
    claim_rows,
    relayer_address,
    relayer_nonce,
    sign_counterfactual,
    sign_exact,
    submit_directly,
    tampered,
    tx_count,
    wrap_erc6492,
)

SIGNATURE = Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE
DEPLOYMENT_FAILED = Reason.SMART_WALLET_DEPLOYMENT_FAILED
NOT_ALLOWED = Reason.EIP6492_FACTORY_NOT_ALLOWED
# An address without code, listed beside the dev chain's WalletFactory: a listed factory that deploys
# nothing is a failed deployment, not an unlisted factory.
CODELESS_FACTORY = "0x" + "22" * 20


@pytest.fixture
async def facilitator(chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str) -> Facilitator:
    """The facilitator of these tests lists the dev chain's WalletFactory and `CODELESS_FACTORY`."""
    return await open_facilitator(sqlite_url, erc6492_factories=f"{chain.wallet_factory},{CODELESS_FACTORY}")


def code_of(chain: DevChain, address: str) -> str:
    return str(chain.rpc.call("eth_getCode", [address, "latest"]))


@dataclass(frozen=True)
class Case:
    """A bad ERC-6492 payment built on the dev chain, and the reason and message it must be refused with."""

    build: Callable[[DevChain, PaymentRequirements, Callable[..., str]], PaymentPayload]
    reason: Reason
    says: str


def _factory_reverts(
    chain: DevChain, requirements: PaymentRequirements, _: Callable[..., str]
) -> PaymentPayload:
    return sign_counterfactual(chain, requirements, factory_calldata=encode_call("noSuchFunction()"))[0]


def _factory_without_code(
    chain: DevChain, requirements: PaymentRequirements, _: Callable[..., str]
) -> PaymentPayload:
    return sign_counterfactual(chain, requirements, factory=CODELESS_FACTORY)[0]


def _deploys_another_wallet(
    chain: DevChain, requirements: PaymentRequirements, _: Callable[..., str]
) -> PaymentPayload:
    other = encode_call("createWallet(address,bytes32)", [Account.create().address, os.urandom(32)])
    return sign_counterfactual(chain, requirements, factory_calldata=other)[0]


def _signed_by_a_stranger(
    chain: DevChain, requirements: PaymentRequirements, _: Callable[..., str]
) -> PaymentPayload:
    return sign_counterfactual(chain, requirements, signer_key=Account.create().key.to_0x_hex())[0]


def _wraps_an_eoa_signature(
    chain: DevChain, requirements: PaymentRequirements, new_payer: Callable[..., str]
) -> PaymentPayload:
    signed = sign_exact(new_payer(), requirements)
    calldata = encode_call(
        "createWallet(address,bytes32)", [signed.payload.authorization.from_address, b"\0" * 32]
    )
    return tampered(signed, signature=wrap_erc6492(chain.wallet_factory, calldata, signed.payload.signature))


def _with_signature(
    raw: bytes,
) -> Callable[[DevChain, PaymentRequirements, Callable[..., str]], PaymentPayload]:
    def build(chain: DevChain, requirements: PaymentRequirements, _: Callable[..., str]) -> PaymentPayload:
        payload, _wallet = sign_counterfactual(chain, requirements)
        return tampered(payload, signature="0x" + raw.hex())

    return build


MAGIC = bytes.fromhex("6492" * 16)
CASES = {
    "factory reverts": Case(_factory_reverts, DEPLOYMENT_FAILED, "factory call reverted"),
    "factory has no code": Case(_factory_without_code, DEPLOYMENT_FAILED, "does not deploy a wallet"),
    "factory deploys another address": Case(
        _deploys_another_wallet, DEPLOYMENT_FAILED, "does not deploy a wallet"
    ),
    "wallet's owner did not sign": Case(_signed_by_a_stranger, SIGNATURE, "not from authorization.from"),
    "wrapper around an EOA's signature": Case(_wraps_an_eoa_signature, SIGNATURE, "signed as an EOA"),
    "magic suffix alone": Case(_with_signature(MAGIC), SIGNATURE, "is not abi.encode"),
    "wrapper truncated": Case(
        _with_signature(
            encode(["address", "bytes", "bytes"], ["0x" + "11" * 20, b"x" * 40, b"y" * 65])[:-40] + MAGIC
        ),
        SIGNATURE,
        "is not abi.encode",
    ),
    "offsets out of range": Case(_with_signature(b"\xff" * 96 + MAGIC), SIGNATURE, "is not abi.encode"),
    "empty inner signature": Case(
        _with_signature(encode(["address", "bytes", "bytes"], ["0x" + "11" * 20, b"x", b""]) + MAGIC),
        SIGNATURE,
        "wraps an empty",
    ),
    "nested wrapper": Case(
        _with_signature(
            encode(["address", "bytes", "bytes"], ["0x" + "11" * 20, b"x", b"y" * 65 + MAGIC]) + MAGIC
        ),
        SIGNATURE,
        "another ERC-6492",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_a_bad_erc6492_payment_is_refused_and_nothing_is_deployed_claimed_or_sent(
    case: Case, chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    requirements = make_requirements(chain)
    payload = case.build(chain, requirements, new_payer)
    payer = payload.payload.authorization.from_address
    before = (relayer_nonce(chain), chain.balance_of(PAY_TO), code_of(chain, payer))

    verified = await facilitator.verify(payload, requirements)
    settled = await facilitator.settle(payload, requirements, idempotency_key="bad-6492")

    assert (verified.is_valid, verified.invalid_reason) == (False, case.reason), verified
    assert case.says in (verified.invalid_message or "")
    assert (settled.success, settled.error_reason, settled.transaction) == (False, case.reason, "")
    assert (relayer_nonce(chain), chain.balance_of(PAY_TO), code_of(chain, payer)) == before
    assert await claim_rows(sqlite_url) == []


UNLISTED = {"no factory listed (the default)": "", "another factory listed": CODELESS_FACTORY}


@pytest.mark.parametrize("listed", UNLISTED.values(), ids=UNLISTED.keys())
async def test_a_counterfactual_wallet_of_an_unlisted_factory_is_refused_and_nothing_changes(
    listed: str, chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    """The relayer never pays to call a factory the operator did not list (X402_ERC6492_FACTORIES)."""
    service = await open_facilitator(sqlite_url, erc6492_factories=listed)
    requirements = make_requirements(chain)
    payload, wallet = sign_counterfactual(chain, requirements)
    relayer = relayer_address(chain)

    def state() -> tuple[object, ...]:
        return (
            tx_count(chain, relayer, "latest"),
            tx_count(chain, relayer, "pending"),
            chain.rpc.call("eth_blockNumber"),
            chain.balance_of(wallet),
            chain.balance_of(PAY_TO),
            code_of(chain, wallet),
        )

    before = state()

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements, idempotency_key="unlisted-factory")

    assert (verified.is_valid, verified.payer) == (False, wallet)
    assert (settled.success, settled.payer, settled.transaction) == (False, wallet, "")
    for reason, message in (
        (verified.invalid_reason, verified.invalid_message),
        (settled.error_reason, settled.error_message),
    ):
        assert reason == NOT_ALLOWED
        assert f"factory {chain.wallet_factory} is not one this facilitator deploys" in (message or "")
    assert state() == before
    assert before[-1] == "0x"
    assert await claim_rows(sqlite_url) == []


async def test_a_counterfactual_wallet_verifies_without_being_deployed(
    chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    requirements = make_requirements(chain)
    payload, wallet = sign_counterfactual(chain, requirements)
    before = (relayer_nonce(chain), chain.balance_of(wallet))

    answers = [await facilitator.verify(payload, requirements) for _ in range(2)]

    assert {(a.is_valid, a.invalid_reason, a.payer) for a in answers} == {(True, None, wallet)}, answers
    assert code_of(chain, wallet) == "0x"
    assert (relayer_nonce(chain), chain.balance_of(wallet)) == before
    assert await claim_rows(sqlite_url) == []


async def test_deploying_the_wallet_counts_against_the_gas_cap(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    """A cap the deployed wallet's transfer fits under, but not its deployment and transfer together."""
    service = await open_facilitator(
        sqlite_url, gas_limit_cap=150_000, erc6492_factories=chain.wallet_factory
    )
    requirements = make_requirements(chain)
    deployed = sign_exact(chain.erc1271_wallet_owner_key, requirements, from_address=chain.erc1271_wallet)
    assert (await service.verify(deployed, requirements)).is_valid
    payload, wallet = sign_counterfactual(chain, requirements)
    nonce_before = relayer_nonce(chain)

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements)

    for reason, message in (
        (verified.invalid_reason, verified.invalid_message),
        (settled.error_reason, settled.error_message),
    ):
        assert reason == Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED
        assert "deploying the wallet and the transfer need" in (message or "")
        assert "cap of 150000" in (message or "")
    assert (relayer_nonce(chain), code_of(chain, wallet)) == (nonce_before, "0x")
    assert await claim_rows(sqlite_url) == []


async def test_a_chain_without_multicall3_refuses_counterfactual_wallets_only(
    chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str]
) -> None:
    chain.rpc.call("anvil_setCode", [MULTICALL3_ADDRESS, "0x"])
    requirements = make_requirements(chain)
    payload, _wallet = sign_counterfactual(chain, requirements)

    verified = await facilitator.verify(payload, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (
        False,
        Reason.INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET,
    )
    assert "no Multicall3" in (verified.invalid_message or "")
    assert (await facilitator.verify(sign_exact(new_payer(), requirements), requirements)).is_valid


async def test_a_counterfactual_wallet_is_deployed_and_pays_in_one_transaction_exactly_once(
    chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    requirements = make_requirements(chain)
    payload, wallet = sign_counterfactual(chain, requirements)
    wallet_before, payee_before, nonce_before = (
        chain.balance_of(wallet),
        chain.balance_of(PAY_TO),
        relayer_nonce(chain),
    )

    settled = await facilitator.settle(payload, requirements, idempotency_key="counterfactual")
    again = await facilitator.settle(payload, requirements, idempotency_key="counterfactual")
    duplicate = await facilitator.settle(payload, requirements)

    assert (settled.success, settled.payer) == (True, wallet), settled
    assert (again.success, again.transaction) == (True, settled.transaction)
    assert (duplicate.success, duplicate.error_reason) == (False, Reason.DUPLICATE_SETTLEMENT)
    sent = chain.rpc.call("eth_getTransactionByHash", [settled.transaction])
    assert sent["to"].lower() == MULTICALL3_ADDRESS.lower()
    assert relayer_nonce(chain) == nonce_before + 1
    assert code_of(chain, wallet) != "0x"
    assert chain.balance_of(wallet) == wallet_before - requirements.amount
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert chain.authorization_state(wallet, bytes.fromhex(payload.payload.authorization.nonce[2:]))
    assert [row["state"] for row in await claim_rows(sqlite_url)] == [ClaimState.SUCCEEDED]


async def test_a_deployed_wallets_erc6492_signature_is_checked_as_erc1271_without_calling_the_factory(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    """Even by a facilitator listing no factory (the default): no factory is called for a deployed wallet."""
    facilitator = await open_facilitator(sqlite_url)
    requirements = make_requirements(chain)
    payload, wallet = sign_counterfactual(chain, requirements)
    factory_call = encode_call("createWallet(address,bytes32)", [Account.create().address, os.urandom(32)])
    # Someone (the payer, a front-runner) deploys the wallet between signing and settlement.
    (_factory, calldata, _inner) = _unwrap(payload.payload.signature)
    chain.rpc.transact(chain.deployer_key, to=chain.wallet_factory, data=calldata)
    assert code_of(chain, wallet) != "0x"
    # The wrapper's factory call is never made once the wallet exists: even a call that would deploy
    # another wallet does not matter.
    rewrapped = wrap_erc6492(chain.wallet_factory, factory_call, "0x" + _inner.hex())
    payload = tampered(payload, signature=rewrapped)

    verified = await facilitator.verify(payload, requirements)
    settled = await facilitator.settle(payload, requirements)

    assert (verified.is_valid, verified.payer) == (True, wallet), verified
    assert settled.success, settled
    sent = chain.rpc.call("eth_getTransactionByHash", [settled.transaction])
    assert sent["to"].lower() == chain.asset.lower()
    assert [row["state"] for row in await claim_rows(sqlite_url)] == [ClaimState.SUCCEEDED]


def _unwrap(signature: str) -> tuple[str, bytes, bytes]:
    raw = bytes.fromhex(signature[2:])[: -len(MAGIC)]
    factory, calldata, inner = decode(["address", "bytes", "bytes"], raw)
    return str(factory), bytes(calldata), bytes(inner)


async def test_a_counterfactual_payment_front_run_by_someone_else_settles_with_their_transaction(
    chain: DevChain, facilitator_settings: Callable[..., FacilitatorSettings], sqlite_url: str
) -> None:
    """Someone deploys the wallet and submits the unwrapped authorization first: the usual front-run rules
    (where foreign settlements count)."""
    facilitator = await Facilitator.open(facilitator_settings(count_foreign_settlements=True))
    try:
        await _front_run_counterfactual(chain, facilitator, sqlite_url)
    finally:
        await facilitator.aclose()


async def _front_run_counterfactual(chain: DevChain, facilitator: Facilitator, sqlite_url: str) -> None:
    requirements = make_requirements(chain)
    payload, wallet = sign_counterfactual(chain, requirements)
    presented_at = int(time.time())
    nonce_before = relayer_nonce(chain)
    _factory, calldata, inner = _unwrap(payload.payload.signature)
    chain.rpc.transact(chain.deployer_key, to=chain.wallet_factory, data=calldata)
    submit_directly(chain, tampered(payload, signature="0x" + inner.hex()))
    [front_run] = chain.rpc.call("eth_getBlockByNumber", ["latest", False])["transactions"]

    settled = await facilitator.settle(payload, requirements, presented_at=presented_at)

    assert (settled.success, settled.transaction, settled.payer) == (True, front_run, wallet), settled
    assert relayer_nonce(chain) == nonce_before
    assert [row["state"] for row in await claim_rows(sqlite_url)] == [ClaimState.SUCCEEDED]
