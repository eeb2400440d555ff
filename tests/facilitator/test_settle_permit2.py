"""Settling Permit2 payments (`exact` by Permit2, and `upto`) on the dev chain, signed by the x402 Python
SDK's own clients: a payment moves the tokens once through the scheme's proxy, an `upto` one what the
settle asks (never above the maximum, nothing for 0) from the key its payer named, and a Permit2 nonce is
settled at most once whoever presents it, however often and however concurrently."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from eth_account import Account
from pydantic import SecretStr

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, encode_call
from a2a_x402.facilitator import ClaimState
from a2a_x402.facilitator.wire import PaymentRequirements, Reason, SettleResponse
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO

from .conftest import OpenFacilitator
from .payments import claim_rows, relayer_address, transfer_logs_of, tx_count
from .permit2_chain import AMOUNT, funded_payer, parsed, permit2_requirements, sdk_sign
from .permit2_payments import resign

SCHEMES = ("exact", "upto")

Payment = tuple[dict[str, Any], PaymentRequirements]


def _signed(chain: DevChain, scheme: str, *, asset: str | None = None, **asked: Any) -> Payment:
    """A payment of `scheme` the SDK's client signs for a fresh payer (`_signed_by`)."""
    _, payment, requirements = _signed_by(chain, scheme, asset=asset, **asked)
    return payment, requirements


def _signed_by(
    chain: DevChain, scheme: str, *, asset: str | None = None, **asked: Any
) -> tuple[str, dict[str, Any], PaymentRequirements]:
    """(the payer's key, its payment, the requirements): `AMOUNT` of `asset` (the plain ERC-20 by default)
    asked by Permit2, the payer holding five times it and having approved Permit2."""
    requirements = permit2_requirements(chain, scheme, asset or chain.plain_asset, **asked)
    key = funded_payer(chain, requirements.asset)
    return key, sdk_sign(chain, key, requirements), requirements


def _payer(payment: dict[str, Any]) -> str:
    return str(payment["payload"]["permit2Authorization"]["from"])


def _nonce(payment: dict[str, Any]) -> int:
    return int(payment["payload"]["permit2Authorization"]["nonce"])


def _charging(requirements: PaymentRequirements, amount: int) -> PaymentRequirements:
    """The requirements an `upto` merchant settles with: what the work used, as the amount."""
    return requirements.model_copy(update={"amount": amount})


def _balances(chain: DevChain, payment: dict[str, Any], asset: str) -> tuple[int, int]:
    return chain.balance_of(_payer(payment), asset=asset), chain.balance_of(PAY_TO, asset=asset)


@pytest.mark.parametrize("asset_field", ["plain_asset", "permit_asset"])
async def test_an_exact_permit2_payment_settles_once_through_the_proxy(
    asset_field: str, database_url: str, chain: DevChain, open_facilitator: OpenFacilitator
) -> None:
    service = await open_facilitator(database_url)
    asset = getattr(chain, asset_field)
    payment, asked = _signed(chain, "exact", asset=asset)
    payer, (payer_before, payee_before) = _payer(payment), _balances(chain, payment, asset)
    relayer_before = tx_count(chain, relayer_address(chain))

    answer = await service.settle(parsed(payment), asked, idempotency_key="permit2-exact")
    again = await service.settle(parsed(payment), asked, idempotency_key="permit2-exact")
    other = await service.settle(parsed(payment), asked)

    assert (answer.success, answer.error_reason, answer.payer, answer.amount) == (True, None, payer, AMOUNT)
    assert again == answer
    assert (other.success, other.error_reason, other.extensions) == (
        False,
        Reason.DUPLICATE_SETTLEMENT,
        {"originalSettlement": {"state": "succeeded", "transaction": answer.transaction}},
    )
    sent = chain.rpc.call("eth_getTransactionByHash", [answer.transaction])
    assert (sent["from"].lower(), sent["to"].lower()) == (
        relayer_address(chain).lower(),
        chain.exact_permit2_proxy.lower(),
    )
    assert transfer_logs_of(chain, answer.transaction) == [
        (asset.lower(), payer.lower(), PAY_TO.lower(), AMOUNT)
    ]
    assert _balances(chain, payment, asset) == (payer_before - AMOUNT, payee_before + AMOUNT)
    assert tx_count(chain, relayer_address(chain)) == relayer_before + 1
    assert chain.permit2_nonce_used(payer, _nonce(payment))
    [row] = await claim_rows(database_url)
    assert (row["state"], row["asset"], row["token"], row["payer"], row["nonce"], row["tx_hash"]) == (
        ClaimState.SUCCEEDED,
        PERMIT2_ADDRESS,
        asset,
        payer,
        f"0x{_nonce(payment):064x}",
        answer.transaction,
    )
    assert SettleResponse.from_wire(row["response"]) == answer
    assert await service.settlement_status(parsed(payment), asked) == answer


async def test_an_upto_payment_settles_what_the_work_used_from_the_key_its_payer_named(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    payment, asked = _signed(chain, "upto")
    used = AMOUNT // 3
    payer_before, payee_before = _balances(chain, payment, chain.plain_asset)

    answer = await service.settle(parsed(payment), _charging(asked, used))

    assert (answer.success, answer.amount, answer.payer) == (True, used, _payer(payment))
    sent = chain.rpc.call("eth_getTransactionByHash", [answer.transaction])
    assert (sent["from"].lower(), sent["to"].lower()) == (
        payment["payload"]["permit2Authorization"]["witness"]["facilitator"].lower(),
        chain.upto_permit2_proxy.lower(),
    )
    assert _balances(chain, payment, chain.plain_asset) == (payer_before - used, payee_before + used)
    assert chain.permit2_nonce_used(_payer(payment), _nonce(payment))
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], int(row["amount"]), row["token"]) == (ClaimState.SUCCEEDED, used, chain.plain_asset)
    # Settled once: the maximum that is left can never be charged with it.
    more = await service.settle(parsed(payment), _charging(asked, AMOUNT - used))
    assert (more.success, more.error_reason) == (False, Reason.DUPLICATE_SETTLEMENT)
    assert _balances(chain, payment, chain.plain_asset) == (payer_before - used, payee_before + used)


async def test_an_upto_settlement_above_the_maximum_is_refused_with_nothing_sent(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    payment, asked = _signed(chain, "upto")
    relayer_before = tx_count(chain, relayer_address(chain))

    answer = await service.settle(parsed(payment), _charging(asked, AMOUNT + 1))

    assert (answer.success, answer.error_reason, answer.transaction) == (
        False,
        Reason.INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT,
        "",
    )
    assert tx_count(chain, relayer_address(chain)) == relayer_before
    assert not chain.permit2_nonce_used(_payer(payment), _nonce(payment))
    assert await claim_rows(sqlite_url) == []


async def test_an_upto_settlement_of_nothing_sends_nothing_and_settles_the_payment_for_good(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    payment, asked = _signed(chain, "upto")
    relayer_before = tx_count(chain, relayer_address(chain))
    balances_before = _balances(chain, payment, chain.plain_asset)

    answer = await service.settle(parsed(payment), _charging(asked, 0), idempotency_key="used-nothing")
    again = await service.settle(parsed(payment), _charging(asked, 0), idempotency_key="used-nothing")
    charged_later = await service.settle(parsed(payment), _charging(asked, AMOUNT))

    # x402's upto scheme: success, no transaction, an amount of 0.
    assert answer.to_json_dict() == {
        "success": True,
        "payer": _payer(payment),
        "transaction": "",
        "network": chain.network,
        "amount": "0",
    }
    assert again == answer
    assert (charged_later.success, charged_later.error_reason, charged_later.extensions) == (
        False,
        Reason.DUPLICATE_SETTLEMENT,
        {"originalSettlement": {"state": "succeeded", "transaction": ""}},
    )
    assert tx_count(chain, relayer_address(chain)) == relayer_before
    assert _balances(chain, payment, chain.plain_asset) == balances_before
    assert not chain.permit2_nonce_used(_payer(payment), _nonce(payment))  # left to expire unused
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], int(row["amount"]), row["tx_hash"]) == (ClaimState.SUCCEEDED, 0, None)


async def test_an_exact_payment_cannot_be_settled_for_nothing(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    payment, asked = _signed(chain, "exact")

    answer = await service.settle(parsed(payment), _charging(asked, 0))

    assert (answer.success, answer.error_reason) == (False, Reason.PERMIT2_AMOUNT_MISMATCH)
    assert await claim_rows(sqlite_url) == []


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_another_payment_with_a_settled_permit2_nonce_is_a_duplicate(
    scheme: str, chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    """Permit2's nonces are the payer's across every token: one settled in one token is spent for all."""
    service = await open_facilitator(sqlite_url)
    key, payment, asked = _signed_by(chain, scheme)
    first = await service.settle(parsed(payment), asked)
    # Another payment, in another token, signed by the same payer with the same nonce.
    _, other, other_asked = _signed_by(chain, scheme, asset=chain.permit_asset)
    changes = {"from": _payer(payment), "nonce": str(_nonce(payment))}
    replay = resign(other, changes, key=key, chain_id=chain.chain_id)
    payee_before = chain.balance_of(PAY_TO, asset=chain.permit_asset)

    answer = await service.settle(parsed(replay), other_asked)

    assert first.success
    assert (answer.success, answer.error_reason, answer.extensions) == (
        False,
        Reason.DUPLICATE_SETTLEMENT,
        {"originalSettlement": {"state": "succeeded", "transaction": first.transaction}},
    )
    assert chain.balance_of(PAY_TO, asset=chain.permit_asset) == payee_before
    assert len(await claim_rows(sqlite_url)) == 1


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_nonce_the_payer_spent_itself_is_refused_and_nothing_is_sent(
    scheme: str, chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    key, payment, asked = _signed_by(chain, scheme)
    nonce = _nonce(payment)
    data = encode_call("invalidateUnorderedNonces(uint256,uint256)", [nonce >> 8, 1 << (nonce & 0xFF)])
    chain.rpc.transact(key, to=PERMIT2_ADDRESS, data=data)
    relayer_before = tx_count(chain, relayer_address(chain))
    balances_before = _balances(chain, payment, chain.plain_asset)

    answer = await service.settle(parsed(payment), asked, presented_at=0)

    assert (answer.success, answer.error_reason, answer.transaction) == (
        False,
        Reason.PERMIT2_INVALID_NONCE,
        "",
    )
    assert answer.extensions is None  # no transaction paid the payee with it
    assert tx_count(chain, relayer_address(chain)) == relayer_before
    assert _balances(chain, payment, chain.plain_asset) == balances_before
    assert await claim_rows(sqlite_url) == []


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_fifty_concurrent_settles_of_one_permit2_payment_make_one_transaction(
    scheme: str, database_url: str, chain: DevChain, open_facilitator: OpenFacilitator
) -> None:
    # Fifty settles at once on a loaded machine may queue past the default budget, and a winner still
    # waiting for its receipt then answers settlement_pending (tested elsewhere): a budget no queue reaches.
    service = await open_facilitator(database_url, receipt_timeout_s=HANG_S)
    payment, asked = _signed(chain, scheme)
    relayer_before = tx_count(chain, relayer_address(chain))
    payee_before = chain.balance_of(PAY_TO, asset=chain.plain_asset)

    answers = await asyncio.gather(*(service.settle(parsed(payment), asked) for _ in range(50)))

    [winner] = [a for a in answers if a.success]
    duplicates = [a for a in answers if not a.success]
    assert {(a.error_reason, a.transaction) for a in duplicates} == {(Reason.DUPLICATE_SETTLEMENT, "")}
    assert {(a.extensions or {})["originalSettlement"]["transaction"] for a in duplicates} == {
        winner.transaction
    }
    assert tx_count(chain, relayer_address(chain)) == relayer_before + 1
    assert chain.balance_of(PAY_TO, asset=chain.plain_asset) == payee_before + AMOUNT


async def test_an_upto_payment_naming_a_key_this_process_does_not_hold_is_refused_with_nothing_sent(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    """Two processes split two keys (one each): only the one holding the key the payer named sends."""
    second = Account.create()
    chain.rpc.call("anvil_setBalance", [second.address, hex(10**18)])
    keys = {"relayer_keys": SecretStr(second.key.to_0x_hex()), "relayer_max_keys": 1}
    first_process = await open_facilitator(sqlite_url, **keys)
    second_process = await open_facilitator(sqlite_url, **keys)
    assert [s.address for s in first_process.relayer_states() if s.held] == [relayer_address(chain)]
    assert [s.address for s in second_process.relayer_states() if s.held] == [second.address]
    extra = {"assetTransferMethod": "permit2", "facilitatorAddress": second.address}
    payment, asked = _signed(chain, "upto", extra=extra)
    counts_before = (tx_count(chain, relayer_address(chain)), tx_count(chain, second.address))
    payee_before = chain.balance_of(PAY_TO, asset=chain.plain_asset)

    refused = await first_process.settle(parsed(payment), asked)

    assert (refused.success, refused.error_reason) == (False, Reason.UPTO_FACILITATOR_MISMATCH)
    assert refused.error_message is not None and "does not hold" in refused.error_message
    assert (tx_count(chain, relayer_address(chain)), tx_count(chain, second.address)) == counts_before
    assert chain.balance_of(PAY_TO, asset=chain.plain_asset) == payee_before
    assert await claim_rows(sqlite_url) == []

    settled = await second_process.settle(parsed(payment), asked)

    assert settled.success
    sender = chain.rpc.call("eth_getTransactionByHash", [settled.transaction])["from"]
    assert sender.lower() == second.address.lower()
    assert chain.balance_of(PAY_TO, asset=chain.plain_asset) == payee_before + AMOUNT


async def test_an_upto_payment_naming_no_key_of_this_facilitator_is_refused_with_nothing_sent(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    stranger = Account.create().address
    extra = {"assetTransferMethod": "permit2", "facilitatorAddress": stranger}
    payment, asked = _signed(chain, "upto", extra=extra)
    relayer_before = tx_count(chain, relayer_address(chain))

    answer = await service.settle(parsed(payment), asked)

    assert (answer.success, answer.error_reason) == (False, Reason.UPTO_FACILITATOR_MISMATCH)
    assert tx_count(chain, relayer_address(chain)) == relayer_before
    assert not chain.permit2_nonce_used(_payer(payment), _nonce(payment))
    assert await claim_rows(sqlite_url) == []
