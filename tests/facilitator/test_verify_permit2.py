"""Verification of Permit2 payments (`exact` by Permit2, and `upto`) on the dev chain, signed by the x402
Python SDK's own clients: every chain check refuses with the SDKs' reason and writes nothing (no claim, no
transaction, the nonce unused); good payments verify, change nothing, and hand settlement a transaction that
pays when the relayer sends it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, encode_call
from a2a_x402.facilitator import Facilitator
from a2a_x402.facilitator.wire import PaymentRequirements, Reason
from tests.facilitator.permit2_payments import STRANGER_KEY, resign
from tests.fixtures.chain import clock_ahead
from tests.fixtures.facilitator import PAY_TO

from .conftest import OpenFacilitator
from .payments import claim_rows, relayer_address, relayer_nonce
from .permit2_chain import AMOUNT, funded_payer, parsed, permit2_requirements, sdk_sign

OTHER = "0x1111111111111111111111111111111111111111"  # an address without code
SCHEMES = ("exact", "upto")
_SIMULATION_FAILED = {
    "exact": Reason.PERMIT2_SIMULATION_FAILED,
    "upto": Reason.INVALID_UPTO_EVM_TRANSACTION_FAILED,
}
_SHORT_OF_FUNDS = {
    "exact": Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE,
    "upto": Reason.PERMIT2_INSUFFICIENT_BALANCE,
}

Payment = tuple[dict[str, Any], PaymentRequirements]


@dataclass(frozen=True)
class Case:
    """A bad payment of `scheme`: how to build it on the chain, its reason, and words its message has."""

    build: Callable[[DevChain, str], Payment]
    reason: Reason | dict[str, Reason]
    says: str


def _signed(chain: DevChain, scheme: str, *, asset: str | None = None, **payer: Any) -> Payment:
    asked = permit2_requirements(chain, scheme, asset or chain.plain_asset)
    return sdk_sign(chain, funded_payer(chain, asked.asset, **payer), asked), asked


def _then(change: Callable[[DevChain, dict[str, Any]], None]) -> Callable[[DevChain, str], Payment]:
    """A good payment, then `change` made to the chain (given the payment)."""

    def build(chain: DevChain, scheme: str) -> Payment:
        payment, asked = _signed(chain, scheme)
        change(chain, payment)
        return payment, asked

    return build


def _without_code(address: Callable[[DevChain, str], str]) -> Callable[[DevChain, str], Payment]:
    def build(chain: DevChain, scheme: str) -> Payment:
        payment, asked = _signed(chain, scheme)
        chain.rpc.call("anvil_setCode", [address(chain, scheme), "0x"])
        return payment, asked

    return build


def _payer(payment: dict[str, Any]) -> str:
    return str(payment["payload"]["permit2Authorization"]["from"])


def _nonce(payment: dict[str, Any]) -> int:
    return int(payment["payload"]["permit2Authorization"]["nonce"])


def _approve(chain: DevChain, key: str, asset: str, amount: int) -> None:
    chain.rpc.transact(key, to=asset, data=encode_call("approve(address,uint256)", [PERMIT2_ADDRESS, amount]))


def _allowance_revoked(chain: DevChain, scheme: str) -> Payment:
    asked = permit2_requirements(chain, scheme, chain.plain_asset)
    key = funded_payer(chain, asked.asset)
    payment = sdk_sign(chain, key, asked)
    _approve(chain, key, asked.asset, 0)  # after signing: the payer takes the approval back
    return payment, asked


def _allowance_short(chain: DevChain, scheme: str) -> Payment:
    asked = permit2_requirements(chain, scheme, chain.plain_asset)
    key = funded_payer(chain, asked.asset)
    _approve(chain, key, asked.asset, AMOUNT - 1)
    return sdk_sign(chain, key, asked), asked


def _nonce_invalidated(chain: DevChain, scheme: str) -> Payment:
    asked = permit2_requirements(chain, scheme, chain.plain_asset)
    key = funded_payer(chain, asked.asset)
    payment = sdk_sign(chain, key, asked)
    nonce = _nonce(payment)
    data = encode_call("invalidateUnorderedNonces(uint256,uint256)", [nonce >> 8, 1 << (nonce & 0xFF)])
    chain.rpc.transact(key, to=PERMIT2_ADDRESS, data=data)
    return payment, asked


def _settled_already(chain: DevChain, scheme: str) -> Payment:
    """A payment someone settled on chain already (by sending the calldata its own verification gave)."""
    return _signed(chain, scheme)  # settled by the test itself, through the facilitator's verified calldata


def _stranger_signed(chain: DevChain, scheme: str) -> Payment:
    payment, asked = _signed(chain, scheme)
    return resign(payment, key=STRANGER_KEY, chain_id=chain.chain_id), asked


def _another_facilitator(chain: DevChain, scheme: str) -> Payment:
    payment, asked = _signed(chain, scheme)
    stranger = Account.from_key(STRANGER_KEY).address
    return resign(payment, {"witness.facilitator": stranger}, chain_id=chain.chain_id), asked


def _asset_without_code(chain: DevChain, scheme: str) -> Payment:
    asked = permit2_requirements(chain, scheme, OTHER)
    return sdk_sign(chain, funded_payer(chain, chain.plain_asset, approved=False), asked), asked


def _paused_token(chain: DevChain, scheme: str) -> Payment:
    """DevUSDC paid through Permit2: every read passes, the token refuses the transfer itself."""
    payment, asked = _signed(chain, scheme, asset=chain.asset)
    chain.set_paused(True)
    return payment, asked


CASES = {
    "Permit2 without code": Case(
        _without_code(lambda chain, _: chain.permit2), Reason.PERMIT2_PROXY_NOT_DEPLOYED, "Permit2"
    ),
    "the scheme's proxy without code": Case(
        _without_code(lambda chain, scheme: getattr(chain, f"{scheme}_permit2_proxy")),
        Reason.PERMIT2_PROXY_NOT_DEPLOYED,
        "x402 proxy",
    ),
    "asset without code": Case(_asset_without_code, Reason.ASSET_NOT_DEPLOYED_CONTRACT, "no code"),
    "Permit2 never approved": Case(
        lambda chain, scheme: _signed(chain, scheme, approved=False),
        Reason.PERMIT2_ALLOWANCE_REQUIRED,
        "approve Permit2",
    ),
    "Permit2 approved for less": Case(_allowance_short, Reason.PERMIT2_ALLOWANCE_REQUIRED, "approve Permit2"),
    "approval revoked after signing": Case(
        _allowance_revoked, Reason.PERMIT2_ALLOWANCE_REQUIRED, "allowance to Permit2 is 0"
    ),
    "balance below the amount": Case(
        lambda chain, scheme: _signed(chain, scheme, amount=AMOUNT - 1), _SHORT_OF_FUNDS, "less than"
    ),
    "nonce invalidated by the payer": Case(_nonce_invalidated, Reason.PERMIT2_INVALID_NONCE, "nonce"),
    "signed by a stranger": Case(_stranger_signed, Reason.INVALID_PERMIT2_SIGNATURE, "not from"),
    "token refuses the transfer": Case(_paused_token, _SIMULATION_FAILED, "TRANSFER_FROM_FAILED"),
}


async def _assert_refused(
    facilitator: Facilitator, payment: dict[str, Any], asked: PaymentRequirements, reason: Reason, says: str
) -> None:
    answer = await facilitator.verify(parsed(payment), asked)

    assert (answer.is_valid, answer.invalid_reason, answer.payer) == (False, reason, _payer(payment)), answer
    assert says in (answer.invalid_message or ""), answer.invalid_message


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_a_bad_permit2_payment_is_refused_with_its_reason_and_nothing_is_written(
    case: Case, scheme: str, chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    payment, asked = case.build(chain, scheme)
    reason = case.reason[scheme] if isinstance(case.reason, dict) else case.reason
    nonce_before = relayer_nonce(chain)

    await _assert_refused(facilitator, payment, asked, reason, case.says)

    assert relayer_nonce(chain) == nonce_before
    assert await claim_rows(sqlite_url) == []


async def test_an_upto_witness_naming_another_facilitator_is_refused(
    chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    payment, asked = _another_facilitator(chain, "upto")

    await _assert_refused(
        facilitator, payment, asked, Reason.UPTO_FACILITATOR_MISMATCH, "witness.facilitator"
    )
    assert await claim_rows(sqlite_url) == []


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_payment_whose_nonce_was_used_on_chain_is_refused(
    scheme: str, chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    payment, asked = _settled_already(chain, scheme)
    verified = await facilitator._permit2.verify(parsed(payment), asked)  # noqa: SLF001 - what settle sends
    chain.rpc.transact(chain.relayer_key, to=verified.target, data=bytes.fromhex(verified.calldata[2:]))
    assert chain.permit2_nonce_used(_payer(payment), _nonce(payment))

    await _assert_refused(facilitator, payment, asked, Reason.PERMIT2_INVALID_NONCE, "already used")
    assert await claim_rows(sqlite_url) == []


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_head_ahead_of_the_clock_refuses_a_deadline_it_would_pass(
    scheme: str, chain: DevChain, facilitator: Facilitator
) -> None:
    payment, asked = _signed(chain, scheme)  # a deadline 120 s away
    clock_ahead(chain.rpc, 300)

    await _assert_refused(facilitator, payment, asked, Reason.PERMIT2_DEADLINE_EXPIRED, "ahead")


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_settlement_above_the_gas_cap_is_refused(
    scheme: str, chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, gas_limit_cap=30_000)
    payment, asked = _signed(chain, scheme)

    await _assert_refused(service, payment, asked, _SIMULATION_FAILED[scheme], "cap of 30000")


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("asset_field", ["plain_asset", "permit_asset"])
async def test_a_good_payment_verifies_changes_nothing_and_its_transaction_pays(
    scheme: str, asset_field: str, chain: DevChain, facilitator: Facilitator, sqlite_url: str
) -> None:
    asset = getattr(chain, asset_field)
    payment, asked = _signed(chain, scheme, asset=asset)
    payer = _payer(payment)
    before = (
        relayer_nonce(chain),
        chain.balance_of(payer, asset=asset),
        chain.balance_of(PAY_TO, asset=asset),
    )

    answers = [await facilitator.verify(parsed(payment), asked) for _ in range(2)]
    verified = await facilitator._permit2.verify(parsed(payment), asked)  # noqa: SLF001 - what settle sends

    assert {(a.is_valid, a.invalid_reason, a.payer) for a in answers} == {(True, None, payer)}
    assert (
        relayer_nonce(chain),
        chain.balance_of(payer, asset=asset),
        chain.balance_of(PAY_TO, asset=asset),
    ) == (before)
    assert not chain.permit2_nonce_used(payer, _nonce(payment))
    assert await claim_rows(sqlite_url) == []
    assert (verified.scheme, verified.payer, verified.asset, verified.amount) == (
        scheme,
        payer,
        asset,
        AMOUNT,
    )
    assert verified.target == getattr(chain, f"{scheme}_permit2_proxy")
    assert verified.sender == (relayer_address(chain) if scheme == "upto" else None)
    assert verified.claim_key(chain.chain_id).nonce == f"0x{_nonce(payment):064x}"
    assert not verified.with_eip2612
    # What settlement would send, sent by the relayer, pays the payee once.
    chain.rpc.transact(chain.relayer_key, to=verified.target, data=bytes.fromhex(verified.calldata[2:]))
    assert chain.balance_of(PAY_TO, asset=asset) == before[2] + AMOUNT
    assert chain.permit2_nonce_used(payer, _nonce(payment))


async def test_an_upto_payment_is_verified_for_its_maximum(chain: DevChain, facilitator: Facilitator) -> None:
    # A payer holding less than the maximum cannot cover every settlement the merchant may make.
    payment, asked = _signed(chain, "upto", amount=AMOUNT // 2)

    answer = await facilitator.verify(parsed(payment), asked)

    assert (answer.is_valid, answer.invalid_reason) == (False, Reason.PERMIT2_INSUFFICIENT_BALANCE)
    assert f"less than the {AMOUNT} to pay" in (answer.invalid_message or "")


async def test_a_payment_not_yet_valid_by_its_witness_is_refused(
    chain: DevChain, facilitator: Facilitator
) -> None:
    later, asked = _valid_from(chain, "exact", int(time.time()) + 600)

    answer = await facilitator.verify(parsed(later), asked)

    assert (answer.is_valid, answer.invalid_reason) == (False, Reason.PERMIT2_NOT_YET_VALID)


def _valid_from(chain: DevChain, scheme: str, valid_after: int, *, asset: str | None = None) -> Payment:
    asked = permit2_requirements(chain, scheme, asset or chain.plain_asset)
    key = funded_payer(chain, asked.asset)
    payment = sdk_sign(chain, key, asked)
    return resign(payment, {"witness.validAfter": str(valid_after)}, key=key, chain_id=chain.chain_id), asked


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_node_simulating_behind_the_clock_accepts_a_payment_valid_when_mined(
    scheme: str, chain: DevChain, facilitator: Facilitator
) -> None:
    # The node's clock an hour behind: its pending block is older than a validAfter the wall clock passed.
    now = int(time.time())
    payment, asked = _valid_from(chain, scheme, now - 30)
    chain.rpc.call("anvil_setTime", [now - 3600])

    answer = await facilitator.verify(parsed(payment), asked)

    assert (answer.is_valid, answer.invalid_reason) == (True, None), answer


async def test_behind_the_clock_a_payment_failing_for_another_reason_is_refused_for_it(
    chain: DevChain, facilitator: Facilitator
) -> None:
    now = int(time.time())
    payment, asked = _valid_from(chain, "upto", now - 30, asset=chain.asset)
    chain.set_paused(True)
    chain.rpc.call("anvil_setTime", [now - 3600])

    await _assert_refused(
        facilitator, payment, asked, Reason.INVALID_UPTO_EVM_TRANSACTION_FAILED, "TRANSFER_FROM_FAILED"
    )
