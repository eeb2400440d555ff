"""Permit2 settlements that went astray: a restart with one in the pool, a crash after its transaction was
sent but before it was recorded (found again by the permit its calldata settled, for either scheme: an
`upto` one for what it charged), a crash before anything was sent, a dropped `upto` transaction sent again
from the key its payer named, and an `exact` permit that someone else submitted to the proxy (counted as
the settlement only where foreign settlements count). Nobody else can submit an `upto` permit: the proxy
takes it only from the key its payer named, so its used nonce is recognised as the crash's is."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, TransactionFailedError
from a2a_x402.facilitator import ClaimState, Facilitator, FacilitatorSettings
from a2a_x402.facilitator.wire import PaymentRequirements, Reason, SettleResponse
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator import PAY_TO

from .conftest import OpenFacilitator
from .payments import claim_rows, insert_claims, left_behind, relayer_address, tx_count
from .permit2_chain import AMOUNT, funded_payer, parsed, permit2_requirements, sdk_sign

Payment = tuple[dict[str, Any], PaymentRequirements]


def _signed(chain: DevChain, scheme: str) -> Payment:
    requirements = permit2_requirements(chain, scheme, chain.plain_asset)
    return sdk_sign(chain, funded_payer(chain, requirements.asset), requirements), requirements


def _authorization(payment: dict[str, Any]) -> dict[str, Any]:
    authorization: dict[str, Any] = payment["payload"]["permit2Authorization"]
    return authorization


def _claim_of(
    chain: DevChain, claim_id: str, payment: dict[str, Any], amount: int = AMOUNT
) -> dict[str, Any]:
    """The row a process killed after claiming `payment` for `amount` (and maybe sending it) left behind."""
    authorization = _authorization(payment)
    return left_behind(
        chain,
        claim_id,
        asset=PERMIT2_ADDRESS,
        token=chain.plain_asset,
        payer=authorization["from"],
        nonce=f"0x{int(authorization['nonce']):064x}",
        amount=amount,
        valid_before=int(authorization["deadline"]) + 1,
    )


async def _decided(
    service: Facilitator, payment: dict[str, Any], asked: PaymentRequirements, key: str
) -> SettleResponse:
    """The first answer that is not pending, from retries with `key`."""
    answers: list[SettleResponse] = []

    async def decided() -> bool:
        answers.append(await service.settle(parsed(payment), asked, idempotency_key=key))
        return answers[-1].error_reason != Reason.SETTLEMENT_PENDING

    await wait_until(decided, what=f"a settlement answer for {key} that is not pending")
    return answers[-1]


async def test_a_settlement_in_the_pool_at_a_restart_is_finished_by_the_next_process(
    chain: DevChain, settings_for: Callable[..., FacilitatorSettings], sqlite_url: str
) -> None:
    payment, asked = _signed(chain, "upto")
    charged = asked.model_copy(update={"amount": AMOUNT // 2})
    first = await Facilitator.open(settings_for(sqlite_url, receipt_timeout_s=0.5))
    chain.rpc.call("evm_setAutomine", [False])
    try:
        pending = await first.settle(parsed(payment), charged, idempotency_key="restart")
    finally:
        await first.aclose()  # the process stops with its transaction in the pool
        chain.rpc.call("evm_setAutomine", [True])
    assert (pending.error_reason, [row["state"] for row in await claim_rows(sqlite_url)]) == (
        Reason.SETTLEMENT_PENDING,
        [ClaimState.BROADCAST],
    )
    chain.rpc.call("evm_mine")
    second = await Facilitator.open(settings_for(sqlite_url))

    async def finished() -> bool:
        await second.reconcile()
        return [row["state"] for row in await claim_rows(sqlite_url)] == [ClaimState.SUCCEEDED]

    try:
        await wait_until(finished, what="the next process's reconcile passes to record the settlement")
        answer = await second.settle(parsed(payment), charged, idempotency_key="restart")
    finally:
        await second.aclose()

    assert (answer.success, answer.transaction, answer.amount) == (True, pending.transaction, AMOUNT // 2)


@pytest.mark.parametrize(
    ("scheme", "charged"), [("exact", AMOUNT), ("upto", AMOUNT // 3)], ids=["exact", "upto"]
)
async def test_a_settlement_sent_but_never_recorded_is_found_by_the_permit_it_settled(
    scheme: str, charged: int, chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    """A process claimed the payment, sent its transaction and died before recording it: the next pass
    finds the nonce used in Permit2 and the transaction whose calldata settled that permit (an `upto` one
    through its own proxy, for what it charged, from the key its payer named)."""
    service = await open_facilitator(sqlite_url)
    payment, asked = _signed(chain, scheme)
    settling = asked.model_copy(update={"amount": charged})
    sent = await service._permit2.presented(parsed(payment), settling).check()  # noqa: SLF001 - what it sends
    payee_before = chain.balance_of(PAY_TO, asset=chain.plain_asset)
    receipt = chain.rpc.transact(chain.relayer_key, to=sent.target, data=bytes.fromhex(sent.calldata[2:]))
    await insert_claims(sqlite_url, _claim_of(chain, "clm_crashed", payment, charged))

    assert await service.reconcile() == 1

    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["tx_hash"]) == (ClaimState.SUCCEEDED, receipt["transactionHash"])
    assert chain.balance_of(PAY_TO, asset=chain.plain_asset) == payee_before + charged
    again = await service.settle(parsed(payment), settling)
    assert (again.error_reason, again.extensions) == (
        Reason.DUPLICATE_SETTLEMENT,
        {"originalSettlement": {"state": "succeeded", "transaction": receipt["transactionHash"]}},
    )


async def test_a_claim_left_before_anything_was_sent_is_released_and_settles_later(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    payment, asked = _signed(chain, "exact")
    await insert_claims(sqlite_url, _claim_of(chain, "clm_unsent", payment))

    assert await service.reconcile() == 1
    [row] = await claim_rows(sqlite_url)
    assert row["state"] == ClaimState.RELEASED
    settled = await service.settle(parsed(payment), asked)

    assert settled.success
    assert chain.permit2_nonce_used(_authorization(payment)["from"], int(_authorization(payment)["nonce"]))


async def test_a_dropped_upto_settlement_whose_nonce_was_taken_is_sent_again_from_the_named_key(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, receipt_timeout_s=0.5)
    payment, asked = _signed(chain, "upto")
    relayer = relayer_address(chain)
    chain.rpc.call("evm_setAutomine", [False])
    try:
        pending = await service.settle(parsed(payment), asked, idempotency_key="upto-renonce")
        chain.rpc.call("anvil_dropTransaction", [pending.transaction])
        chain.rpc.call("anvil_setNonce", [relayer, hex(tx_count(chain, relayer, "pending") + 1)])
        resent = await service.settle(parsed(payment), asked, idempotency_key="upto-renonce")
    finally:
        chain.rpc.call("evm_setAutomine", [True])
    chain.rpc.call("evm_mine")

    settled = await _decided(service, payment, asked, "upto-renonce")

    assert resent.transaction not in ("", pending.transaction)
    assert (settled.success, settled.transaction) == (True, resent.transaction)
    sent = chain.rpc.call("eth_getTransactionByHash", [resent.transaction])
    assert (sent["from"].lower(), sent["to"].lower()) == (relayer.lower(), chain.upto_permit2_proxy.lower())


def _front_run(chain: DevChain, calldata: str, target: str, gas: int | None = None) -> str:
    """Someone not the facilitator submits the permit to the proxy (with `gas`: not estimated first); the
    hash of their transaction."""
    someone = Account.create()
    chain.rpc.call("anvil_setBalance", [someone.address, hex(10**18)])
    receipt = chain.rpc.transact(
        someone.key.to_0x_hex(), to=target, data=bytes.fromhex(calldata[2:]), gas=gas
    )
    return str(receipt["transactionHash"])


async def test_an_exact_permit_someone_else_submitted_is_refused_naming_their_transaction_by_default(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url)
    payment, asked = _signed(chain, "exact")
    verified = await service._permit2.verify(parsed(payment), asked)  # noqa: SLF001 - the public calldata
    presented_at = int(time.time())
    theirs = _front_run(chain, verified.calldata, verified.target)
    relayer_before = tx_count(chain, relayer_address(chain))

    refused = await service.settle(parsed(payment), asked, presented_at=presented_at)

    assert (refused.success, refused.error_reason) == (False, Reason.PERMIT2_INVALID_NONCE)
    assert refused.extensions is not None
    assert refused.extensions["settledElsewhere"]["transaction"] == theirs
    assert tx_count(chain, relayer_address(chain)) == relayer_before
    assert await claim_rows(sqlite_url) == []


async def test_an_exact_permit_someone_else_submitted_is_the_settlement_where_foreign_ones_count(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, count_foreign_settlements=True)
    payment, asked = _signed(chain, "exact")
    verified = await service._permit2.verify(parsed(payment), asked)  # noqa: SLF001 - the public calldata
    payee_before = chain.balance_of(PAY_TO, asset=chain.plain_asset)
    presented_at = int(time.time())
    theirs = _front_run(chain, verified.calldata, verified.target)

    settled = await service.settle(
        parsed(payment), asked, idempotency_key="theirs", presented_at=presented_at
    )
    other = await service.settle(parsed(payment), asked)

    assert (settled.success, settled.transaction, settled.amount) == (True, theirs, AMOUNT)
    assert (other.error_reason, other.extensions) == (
        Reason.DUPLICATE_SETTLEMENT,
        {"originalSettlement": {"state": "succeeded", "transaction": theirs}},
    )
    assert chain.balance_of(PAY_TO, asset=chain.plain_asset) == payee_before + AMOUNT
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["tx_hash"], row["token"]) == (ClaimState.SUCCEEDED, theirs, chain.plain_asset)


async def test_an_upto_permit_someone_else_submits_reverts_and_is_settled_once_from_the_named_key(
    chain: DevChain, open_facilitator: OpenFacilitator, sqlite_url: str
) -> None:
    """The proxy takes an `upto` permit only from the key its payer named: a front-runner's attempt reverts
    on chain, leaves the nonce unused, and the facilitator settles the payment once, from that key."""
    service = await open_facilitator(sqlite_url)
    payment, asked = _signed(chain, "upto")
    charged = asked.model_copy(update={"amount": AMOUNT // 2})
    sent = await service._permit2.presented(parsed(payment), charged).check()  # noqa: SLF001 - its calldata
    payee_before = chain.balance_of(PAY_TO, asset=chain.plain_asset)
    with pytest.raises(TransactionFailedError):
        _front_run(chain, sent.calldata, sent.target, gas=4 * sent.gas_estimate)
    authorization = _authorization(payment)
    assert not chain.permit2_nonce_used(authorization["from"], int(authorization["nonce"]))

    settled = await service.settle(parsed(payment), charged)

    assert (settled.success, settled.amount) == (True, AMOUNT // 2), settled
    mined = chain.rpc.call("eth_getTransactionByHash", [settled.transaction])
    assert mined["from"].lower() == relayer_address(chain).lower()
    assert chain.balance_of(PAY_TO, asset=chain.plain_asset) == payee_before + AMOUNT // 2
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["tx_hash"]) == (ClaimState.SUCCEEDED, settled.transaction)
