"""Permit2 payments from contract wallets (ERC-1271, ERC-6492) and from payers who approve Permit2 by the
x402 SDKs' `eip2612GasSponsoring` extension: verified as the x402 SDKs' clients make them, refused with the
SDKs' reasons, and what settlement would send pays when the relayer sends it."""

from __future__ import annotations

import copy
import os
import time
from typing import Any

import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_utils.address import to_checksum_address
from x402.extensions.eip2612_gas_sponsoring import EIP2612_GAS_SPONSORING_KEY

from a2a_x402.devchain import DevChain, load_artifact
from a2a_x402.facilitator import Facilitator
from a2a_x402.facilitator.wire import PaymentRequirements, Reason
from tests.fixtures.facilitator import PAY_TO

from .conftest import OpenFacilitator
from .payments import claim_rows, relayer_nonce, wrap_erc6492
from .permit2_chain import (
    AMOUNT,
    approve_from,
    counterfactual_payment,
    funded_payer,
    parsed,
    permit2_requirements,
    sdk_sign,
    wallet_payment,
)
from .permit2_payments import PAYER_KEY

SCHEMES = ("exact", "upto")
OTHER = "0x1111111111111111111111111111111111111111"


def _funded_wallet(chain: DevChain, wallet: str, asset: str) -> None:
    chain.mint(wallet, 5 * AMOUNT, asset=asset)
    approve_from(chain, wallet, asset)


def _pays(chain: DevChain, target: str, calldata: str, asset: str) -> None:
    """Send what settlement would send, from the relayer: the payee gets the amount."""
    before = chain.balance_of(PAY_TO, asset=asset)
    chain.rpc.transact(chain.relayer_key, to=target, data=bytes.fromhex(calldata[2:]))
    assert chain.balance_of(PAY_TO, asset=asset) == before + AMOUNT


async def _refused(
    service: Facilitator, payment: dict[str, Any], asked: PaymentRequirements, reason: Reason, says: str
) -> None:
    answer = await service.verify(parsed(payment), asked)
    assert (answer.is_valid, answer.invalid_reason) == (False, reason), answer
    assert says in (answer.invalid_message or ""), answer.invalid_message


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_contract_wallet_pays_through_erc1271(
    scheme: str, chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    wallet, asset = chain.erc1271_wallet, chain.plain_asset
    _funded_wallet(chain, wallet, asset)
    asked = permit2_requirements(chain, scheme, asset)
    payment = wallet_payment(chain, wallet, chain.erc1271_wallet_owner_key, asked)

    answer = await facilitator.verify(parsed(payment), asked)
    verified = await facilitator._permit2.verify(parsed(payment), asked)  # noqa: SLF001 - what settle sends

    assert (answer.is_valid, answer.payer) == (True, wallet), answer
    assert verified.code_hash is not None
    assert await claim_rows(sqlite_url) == []
    _pays(chain, verified.target, verified.calldata, asset)


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_contract_wallet_refuses_a_strangers_signature(
    scheme: str, chain: DevChain, facilitator: Facilitator
) -> None:
    wallet, asset = chain.erc1271_wallet, chain.plain_asset
    _funded_wallet(chain, wallet, asset)
    asked = permit2_requirements(chain, scheme, asset)
    payment = wallet_payment(chain, wallet, PAYER_KEY, asked)

    await _refused(facilitator, payment, asked, Reason.INVALID_PERMIT2_SIGNATURE, "not from")


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_wallet_valid_only_without_fees_is_refused(
    scheme: str, chain: DevChain, facilitator: Facilitator
) -> None:
    """The wallet's ERC-1271 check and the simulation are asked at the fees the real transaction carries."""
    owner = Account.create()
    artifact = load_artifact("GasPriceSensitiveWallet")
    code = bytes.fromhex(artifact.bytecode[2:]) + encode(["address"], [owner.address])
    wallet = to_checksum_address(
        chain.rpc.transact(chain.deployer_key, to=None, data=code)["contractAddress"]
    )
    _funded_wallet(chain, wallet, chain.plain_asset)
    asked = permit2_requirements(chain, scheme, chain.plain_asset)
    payment = wallet_payment(chain, wallet, owner.key.to_0x_hex(), asked)

    await _refused(facilitator, payment, asked, Reason.INVALID_PERMIT2_SIGNATURE, "not from")


async def test_an_erc6492_signature_of_a_deployed_wallet_is_unwrapped(
    chain: DevChain, facilitator: Facilitator
) -> None:
    wallet, asset = chain.erc1271_wallet, chain.plain_asset
    _funded_wallet(chain, wallet, asset)
    asked = permit2_requirements(chain, "upto", asset)
    payment = wallet_payment(chain, wallet, chain.erc1271_wallet_owner_key, asked)
    # A factory that is listed nowhere: a wallet that has code is never deployed again.
    payment["payload"]["signature"] = wrap_erc6492(OTHER, b"\x01", payment["payload"]["signature"])

    answer = await facilitator.verify(parsed(payment), asked)

    assert (answer.is_valid, answer.payer) == (True, wallet), answer


async def test_a_counterfactual_wallet_is_deployed_and_pays_in_one_exact_settlement(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, erc6492_factories=chain.wallet_factory)
    asked = permit2_requirements(chain, "exact", chain.plain_asset)
    payment, wallet = counterfactual_payment(chain, asked)

    answer = await service.verify(parsed(payment), asked)
    verified = await service._permit2.verify(parsed(payment), asked)  # noqa: SLF001 - what settle sends

    assert (answer.is_valid, answer.payer) == (True, wallet), answer
    assert chain.rpc.call("eth_getCode", [wallet, "latest"]) == "0x"  # verifying deploys nothing
    assert verified.target == "0xcA11bde05977b3631167028862bE2a173976CA11"  # Multicall3
    _pays(chain, verified.target, verified.calldata, asked.asset)
    assert chain.rpc.call("eth_getCode", [wallet, "latest"]) != "0x"


async def test_a_counterfactual_wallet_of_an_unlisted_factory_is_refused(
    chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    asked = permit2_requirements(chain, "exact", chain.plain_asset)
    payment, _ = counterfactual_payment(chain, asked)

    await _refused(facilitator, payment, asked, Reason.EIP6492_FACTORY_NOT_ALLOWED, chain.wallet_factory)
    assert await claim_rows(sqlite_url) == []


async def test_a_counterfactual_wallet_cannot_pay_upto(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, erc6492_factories=chain.wallet_factory)
    asked = permit2_requirements(chain, "upto", chain.plain_asset)
    payment, _ = counterfactual_payment(chain, asked)

    reason = Reason.INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET
    await _refused(service, payment, asked, reason, "deploy it first")


async def test_a_counterfactual_wallet_without_the_allowance_is_told_to_approve(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, erc6492_factories=chain.wallet_factory)
    asked = permit2_requirements(chain, "exact", chain.plain_asset)
    payment, _ = counterfactual_payment(chain, asked, approve=False)

    await _refused(service, payment, asked, Reason.PERMIT2_ALLOWANCE_REQUIRED, "approve Permit2")


def _sponsored(
    chain: DevChain, scheme: str, *, approved: bool = False
) -> tuple[dict[str, Any], PaymentRequirements]:
    """A payer of the EIP-2612 token (`approved`: who approved Permit2 already) paying with the SDK's
    EIP-2612 approval of Permit2 in the `eip2612GasSponsoring` extension."""
    asked = permit2_requirements(chain, scheme, chain.permit_asset)
    key = funded_payer(chain, asked.asset, approved=approved)
    return sdk_sign(chain, key, asked, eip2612=True), asked


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_payer_without_an_allowance_pays_with_its_eip2612_permit(
    scheme: str, chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    payment, asked = _sponsored(chain, scheme)
    nonce_before = relayer_nonce(chain)

    answer = await facilitator.verify(parsed(payment), asked)
    verified = await facilitator._permit2.verify(parsed(payment), asked)  # noqa: SLF001 - what settle sends

    assert answer.is_valid, answer
    assert verified.with_eip2612
    assert (relayer_nonce(chain), await claim_rows(sqlite_url)) == (nonce_before, [])
    _pays(chain, verified.target, verified.calldata, asked.asset)


async def test_a_payer_with_an_allowance_is_settled_without_its_permit(
    chain: DevChain, facilitator: Facilitator
) -> None:
    payment, asked = _sponsored(chain, "exact", approved=True)

    verified = await facilitator._permit2.verify(parsed(payment), asked)  # noqa: SLF001 - what settle sends

    assert not verified.with_eip2612


def _info(payment: dict[str, Any], **changes: str) -> dict[str, Any]:
    changed = copy.deepcopy(payment)
    changed["extensions"][EIP2612_GAS_SPONSORING_KEY]["info"].update(changes)
    return changed


EXTENSION_REFUSALS = {
    "another owner": ({"from": OTHER}, Reason.EIP2612_FROM_MISMATCH),
    "another token": ({"asset": OTHER}, Reason.EIP2612_ASSET_MISMATCH),
    "another spender": ({"spender": OTHER}, Reason.EIP2612_SPENDER_NOT_PERMIT2),
    "expired": ({"deadline": str(int(time.time()) - 1)}, Reason.EIP2612_DEADLINE_EXPIRED),
    "another amount": ({"amount": str(AMOUNT - 1)}, Reason.PERMIT2_2612_AMOUNT_MISMATCH),
    "a signature of 64 bytes": ({"signature": "0x" + "11" * 64}, Reason.INVALID_EIP2612_EXTENSION_FORMAT),
    "a nonce that is no number": ({"nonce": "one"}, Reason.INVALID_EIP2612_EXTENSION_FORMAT),
}


@pytest.mark.parametrize(("changes", "reason"), EXTENSION_REFUSALS.values(), ids=EXTENSION_REFUSALS.keys())
async def test_an_eip2612_permit_that_cannot_approve_permit2_is_refused(
    changes: dict[str, str], reason: Reason, chain: DevChain, facilitator: Facilitator
) -> None:
    payment, asked = _sponsored(chain, "upto")

    await _refused(facilitator, _info(payment, **changes), asked, reason, "")


async def test_an_eip2612_permit_the_token_refuses_is_told_as_a_missing_allowance(
    chain: DevChain, facilitator: Facilitator
) -> None:
    payment, asked = _sponsored(chain, "exact")
    # A signature of another key over another digest: the token's permit reverts, and the proxy goes on.
    forged = Account.unsafe_sign_hash(os.urandom(32), Account.create().key).signature.to_0x_hex()
    refused = _info(payment, signature=forged)

    await _refused(facilitator, refused, asked, Reason.PERMIT2_ALLOWANCE_REQUIRED, "EIP-2612 permit")
