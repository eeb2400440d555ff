"""Paying the real reference merchant on a real chain: happy paths, refusals, lost answers, fresh terms."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from a2a.types import TaskState
from eth_account import Account

from a2a_x402.devchain import DEFAULT_MINT_ATOMIC, DevChain
from a2a_x402.extension import (
    EXTENSION_URI,
    PaymentCompletedData,
    PaymentErrorCode,
    PaymentRequiredData,
    PaymentVerifiedData,
)
from a2a_x402.facilitator.wire import PaymentPayload
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.payer import (
    AmountOverLimitError,
    Binding,
    InsufficientFundsError,
    MerchantUnreachableError,
    Payer,
    PayerSettings,
    PaymentAttemptsExhaustedError,
    PaymentFailedError,
    PaymentPendingError,
    PaymentPolicy,
    PaymentStage,
    PayToNotPinnedError,
    StageKind,
)
from tests.fixtures.deadlines import HANG_S

from .conftest import PAY_TO, PRICE, TENANT, TENANT_PAY_TO, TEXT, Fault, FaultyTransport, sent_message

pytestmark = pytest.mark.timeout(60)

OTHER_ADDRESS = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f"  # anvil account 8: listed nowhere
SUMMARY = "7 words, 2 sentences, 36 characters."
# Retries fast enough for tests; the run itself is unchanged.
FAST = PayerSettings(retry_backoff_s=0.01, poll_interval_s=0.05)

S = TaskState


def address_of(key: str) -> str:
    return str(Account.from_key(key).address)


def block_number(chain: DevChain) -> int:
    return int(chain.rpc.call("eth_blockNumber"), 16)


def nonce_of(stage: PaymentStage) -> bytes:
    assert isinstance(stage.payload, PaymentPayload)
    return bytes.fromhex(stage.payload.payload.authorization.nonce[2:])


def signed_stages(stages: list[PaymentStage]) -> list[PaymentStage]:
    return [s for s in stages if s.kind is StageKind.PAYMENT_SIGNED]


async def run(payer: Payer, *, streaming: bool, stages: list[PaymentStage]) -> None:
    """Pay for TEXT, collecting every stage (the COMPLETED stage carries the result)."""
    if streaming:
        async for stage in payer.pay_streaming(TEXT):
            stages.append(stage)
    else:
        await payer.pay(TEXT, on_stage=stages.append)


async def task_state(base_url: str, task_id: str) -> str:
    """The task's state as the merchant reports it, read without the payer."""
    headers = {"A2A-Version": "1.0", "A2A-Extensions": EXTENSION_URI}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=HANG_S) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        reply = await http.post("/a2a/jsonrpc", json=body)
    state: str = reply.json()["result"]["status"]["state"]
    return state


def redirect_pay_to(card: dict[str, Any]) -> None:
    """Make the card list another payee than the one the merchant's terms name."""
    for extension in card["capabilities"]["extensions"]:
        for entry in extension["params"]["payTo"]:
            entry["address"] = OTHER_ADDRESS


@pytest.mark.parametrize("binding", list(Binding))
async def test_pay_settles_once_and_returns_the_artifact(
    binding: Binding, merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    key = new_payer()
    stages: list[PaymentStage] = []
    policy = PaymentPolicy(max_amount_atomic=PRICE)  # the cap is inclusive

    async with await Payer.connect(merchant(), key, binding=binding, policy=policy) as payer:
        result = await payer.pay(TEXT, on_stage=stages.append)

    assert [(s.kind, s.state) for s in stages] == [
        (StageKind.TASK, S.TASK_STATE_INPUT_REQUIRED),
        (StageKind.PAYMENT_SIGNED, S.TASK_STATE_INPUT_REQUIRED),
        (StageKind.TASK, S.TASK_STATE_COMPLETED),
        (StageKind.COMPLETED, S.TASK_STATE_COMPLETED),
    ]
    assert stages[-1].result is result
    assert result.state == S.TASK_STATE_COMPLETED
    assert result.paid is not None and (result.paid.amount, result.paid.pay_to) == (PRICE, PAY_TO)
    assert [r.success for r in result.receipts] == [True]
    assert chain.rpc.call("eth_getTransactionReceipt", [result.transaction])["status"] == "0x1"
    assert chain.balance_of(PAY_TO) == PRICE
    assert chain.balance_of(address_of(key)) == DEFAULT_MINT_ATOMIC - PRICE
    [artifact] = result.artifacts
    assert artifact.parts[1].text == SUMMARY
    assert artifact.parts[0].data.struct_value.fields["words"].number_value == 7


async def test_pay_pays_the_tenant_it_talks_to(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    tenants = TenantRegistry(
        [Tenant(id="", pay_to=PAY_TO, price=PRICE), Tenant(id=TENANT, pay_to=TENANT_PAY_TO, price=2 * PRICE)]
    )
    url = merchant(tenants=tenants)

    async with await Payer.connect(url, new_payer(), binding=Binding.HTTP_JSON, tenant=TENANT) as payer:
        result = await payer.pay(TEXT)

    assert result.paid is not None and (result.paid.amount, result.paid.pay_to) == (2 * PRICE, TENANT_PAY_TO)
    assert (chain.balance_of(TENANT_PAY_TO), chain.balance_of(PAY_TO)) == (2 * PRICE, 0)


@pytest.mark.parametrize("binding", list(Binding))
async def test_pay_streaming_yields_each_stage_as_it_arrives(
    binding: Binding, merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    stages: list[PaymentStage] = []

    async with await Payer.connect(merchant(), new_payer(), binding=binding) as payer:
        await run(payer, streaming=True, stages=stages)

    assert [(s.kind, s.state, type(s.payment)) for s in stages] == [
        (StageKind.TASK, S.TASK_STATE_SUBMITTED, type(None)),
        (StageKind.STATUS, S.TASK_STATE_INPUT_REQUIRED, PaymentRequiredData),
        (StageKind.PAYMENT_SIGNED, S.TASK_STATE_INPUT_REQUIRED, PaymentRequiredData),
        (StageKind.STATUS, S.TASK_STATE_WORKING, PaymentVerifiedData),
        (StageKind.ARTIFACT, S.TASK_STATE_WORKING, PaymentVerifiedData),
        (StageKind.STATUS, S.TASK_STATE_COMPLETED, PaymentCompletedData),
        (StageKind.COMPLETED, S.TASK_STATE_COMPLETED, PaymentCompletedData),
    ]
    artifact = stages[4].artifact
    assert artifact is not None and artifact.parts[1].text == SUMMARY
    result = stages[-1].result
    assert result is not None and result.transaction is not None
    assert stages[5].transaction == result.transaction
    assert chain.rpc.call("eth_getTransactionReceipt", [result.transaction])["status"] == "0x1"
    assert chain.balance_of(PAY_TO) == PRICE


async def test_terms_paying_an_address_the_card_does_not_list_are_refused_before_signing(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    url, key = merchant(card_edit=redirect_pay_to), new_payer()
    stages: list[PaymentStage] = []
    block = block_number(chain)

    async with await Payer.connect(url, key) as payer:
        with pytest.raises(PayToNotPinnedError) as caught:
            await payer.pay(TEXT, on_stage=stages.append)

    assert (caught.value.code, caught.value.signed) == ("pay_to_not_pinned", False)
    assert PAY_TO in str(caught.value)
    assert signed_stages(stages) == []
    assert block_number(chain) == block  # nothing at all happened on chain
    assert caught.value.task_id is not None
    assert await task_state(url, caught.value.task_id) == "TASK_STATE_CANCELED"  # the payer declined


async def test_terms_over_the_policy_maximum_are_refused_before_signing(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    url, key = merchant(), new_payer()
    stages: list[PaymentStage] = []
    block = block_number(chain)
    policy = PaymentPolicy(max_amount_atomic=PRICE - 1)

    async with await Payer.connect(url, key, policy=policy) as payer:
        with pytest.raises(AmountOverLimitError) as caught:
            await payer.pay(TEXT, on_stage=stages.append)

    assert (caught.value.code, caught.value.signed) == ("amount_over_limit", False)
    assert signed_stages(stages) == []
    assert block_number(chain) == block


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize("fault", [Fault.LOSE_ANSWER, Fault.LOSE_REQUEST], ids=lambda f: f.value)
async def test_a_lost_submission_is_presented_again_and_never_signed_again(
    fault: Fault,
    streaming: bool,
    merchant: Callable[..., str],
    chain: DevChain,
    new_payer: Callable[..., str],
) -> None:
    key = new_payer()
    transport = FaultyTransport(fault)
    stages: list[PaymentStage] = []

    async with httpx.AsyncClient(timeout=HANG_S, transport=transport) as http:
        async with await Payer.connect(merchant(), key, http=http, settings=FAST) as payer:
            await run(payer, streaming=streaming, stages=stages)

    kinds = [s.kind for s in stages]
    assert kinds.count(StageKind.PAYMENT_SIGNED) == 1
    assert kinds.count(StageKind.RESUBMITTED) == 1
    first, again = transport.selected
    assert sent_message(first) == sent_message(again)  # the same message: messageId, payload, nonce
    result = stages[-1].result
    assert result is not None and result.state == S.TASK_STATE_COMPLETED
    assert result.artifacts[0].parts[1].text == SUMMARY
    assert chain.balance_of(PAY_TO) == PRICE  # exactly one transfer
    assert chain.balance_of(address_of(key)) == DEFAULT_MINT_ATOMIC - PRICE
    assert chain.authorization_state(address_of(key), nonce_of(signed_stages(stages)[0]))


async def test_a_payment_that_never_arrives_is_not_signed_again(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    transport = FaultyTransport(Fault.LOSE_REQUEST, times=100)
    stages: list[PaymentStage] = []
    settings = PayerSettings(submit_attempts=3, retry_backoff_s=0.01)

    async with httpx.AsyncClient(timeout=HANG_S, transport=transport) as http:
        async with await Payer.connect(merchant(), new_payer(), http=http, settings=settings) as payer:
            with pytest.raises(MerchantUnreachableError) as caught:
                await payer.pay(TEXT, on_stage=stages.append)

    assert (caught.value.code, caught.value.signed) == ("merchant_unreachable", True)
    assert len(signed_stages(stages)) == 1
    assert len(transport.selected) == 3
    assert len({sent_message(r)["messageId"] for r in transport.selected}) == 1
    assert chain.balance_of(PAY_TO) == 0


async def test_fresh_terms_after_insufficient_funds_get_a_new_authorization(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    key = new_payer(PRICE - 1)
    fresh_terms: list[PaymentRequiredData] = []
    stages: list[PaymentStage] = []

    async def top_up(terms: PaymentRequiredData) -> None:
        fresh_terms.append(terms)
        await asyncio.to_thread(chain.mint, address_of(key), PRICE)

    async with await Payer.connect(merchant(), key, on_fresh_terms=top_up) as payer:
        result = await payer.pay(TEXT, on_stage=stages.append)

    assert [t.error for t in fresh_terms] == [PaymentErrorCode.INSUFFICIENT_FUNDS]
    assert [(s.kind, getattr(s.payment, "error", None)) for s in stages[:-1]] == [
        (StageKind.TASK, None),
        (StageKind.PAYMENT_SIGNED, None),
        (StageKind.TASK, PaymentErrorCode.INSUFFICIENT_FUNDS),  # fresh terms, and only then
        (StageKind.PAYMENT_SIGNED, PaymentErrorCode.INSUFFICIENT_FUNDS),
        (StageKind.TASK, None),
    ]
    first, second = signed_stages(stages)
    assert nonce_of(first) != nonce_of(second)
    assert not chain.authorization_state(address_of(key), nonce_of(first))
    assert chain.authorization_state(address_of(key), nonce_of(second))
    assert result.state == S.TASK_STATE_COMPLETED
    assert chain.balance_of(PAY_TO) == PRICE
    assert chain.balance_of(address_of(key)) == PRICE - 1


async def test_fresh_terms_are_answered_a_bounded_number_of_times(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    stages: list[PaymentStage] = []
    settings = PayerSettings(max_payments=2)

    async def no_top_up(terms: PaymentRequiredData) -> None:
        """A hook that could have topped the payer up (so the payer signs again) but did not."""

    connecting = Payer.connect(merchant(), new_payer(PRICE - 1), settings=settings, on_fresh_terms=no_top_up)
    async with await connecting as payer:
        with pytest.raises(PaymentAttemptsExhaustedError) as caught:
            await payer.pay(TEXT, on_stage=stages.append)

    assert caught.value.error is PaymentErrorCode.INSUFFICIENT_FUNDS
    assert caught.value.signed is True
    assert len(signed_stages(stages)) == 2
    assert chain.balance_of(PAY_TO) == 0


async def test_insufficient_funds_stop_the_run_at_the_first_refusal_without_a_hook(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    key = new_payer(PRICE - 1)
    stages: list[PaymentStage] = []

    async with await Payer.connect(merchant(), key, settings=FAST) as payer:
        with pytest.raises(InsufficientFundsError) as caught:
            await payer.pay(TEXT, on_stage=stages.append)

    error = caught.value
    assert (error.code, error.signed, error.payer) == ("insufficient_funds", True, address_of(key))
    assert (error.refused.amount, error.refused.asset, error.refused.network) == (
        PRICE,
        chain.asset,
        chain.network,
    )
    assert f"{address_of(key)} holds less than {PRICE} atomic units of {chain.asset}" in str(error)
    [signed] = signed_stages(stages)  # one signature, refused; none after it
    assert not chain.authorization_state(address_of(key), nonce_of(signed))
    assert chain.balance_of(PAY_TO) == 0
    assert chain.balance_of(address_of(key)) == PRICE - 1


async def test_expired_payments_are_signed_again_up_to_the_bound(
    merchant: Callable[..., str],
    chain: DevChain,
    new_payer: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The in-process facilitator wants validBefore further ahead than any authorization the payer signs
    # (now + the terms' 300 s): each one reaches it as expired, which only a new signature can cure.
    monkeypatch.setenv("X402_VALIDITY_MARGIN_S", "600")
    stages: list[PaymentStage] = []

    async with await Payer.connect(merchant(), new_payer(), settings=FAST) as payer:
        with pytest.raises(PaymentAttemptsExhaustedError) as caught:
            await payer.pay(TEXT, on_stage=stages.append)

    assert caught.value.error is PaymentErrorCode.EXPIRED_PAYMENT
    assert len(signed_stages(stages)) == FAST.max_payments
    assert chain.balance_of(PAY_TO) == 0


async def test_a_failed_payment_raises_with_the_merchant_error_code(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    transport = FaultyTransport(Fault.CORRUPT_SIGNATURE)

    async with httpx.AsyncClient(timeout=HANG_S, transport=transport) as http:
        async with await Payer.connect(merchant(), new_payer(), http=http) as payer:
            with pytest.raises(PaymentFailedError) as caught:
                await payer.pay(TEXT)

    failure = caught.value
    assert (failure.code, failure.state, failure.signed) == ("payment_failed", S.TASK_STATE_FAILED, True)
    assert failure.error is PaymentErrorCode.INVALID_SIGNATURE
    assert failure.receipts == ()
    assert chain.balance_of(PAY_TO) == 0


def no_streaming(card: dict[str, Any]) -> None:
    card["capabilities"]["streaming"] = False


async def test_pay_streaming_pays_a_merchant_without_streaming_over_send_message(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    stages: list[PaymentStage] = []

    async with await Payer.connect(merchant(card_edit=no_streaming), new_payer()) as payer:
        await run(payer, streaming=True, stages=stages)

    assert [s.kind for s in stages] == [
        StageKind.TASK,
        StageKind.PAYMENT_SIGNED,
        StageKind.TASK,
        StageKind.COMPLETED,
    ]
    assert chain.balance_of(PAY_TO) == PRICE


async def test_a_pending_settlement_is_polled_until_it_completes(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    url, key = merchant(settle_timeout_s=0.5), new_payer()
    stages: list[PaymentStage] = []
    mined: list[asyncio.Task[object]] = []

    def mine_once_pending(stage: PaymentStage) -> None:
        stages.append(stage)
        if stage.state == S.TASK_STATE_WORKING and not mined:
            mined.append(asyncio.ensure_future(asyncio.to_thread(chain.rpc.call, "evm_mine")))

    chain.rpc.call("evm_setAutomine", [False])  # the settlement stays in the pool until mined
    async with await Payer.connect(url, key, settings=FAST) as payer:
        result = await payer.pay(TEXT, on_stage=mine_once_pending)
    await asyncio.gather(*mined)

    working = [s for s in stages if s.state == S.TASK_STATE_WORKING]
    assert len(working) == 1 and isinstance(working[0].payment, PaymentVerifiedData)
    assert working[0].transaction is not None and working[0].transaction == result.transaction
    assert result.state == S.TASK_STATE_COMPLETED
    assert chain.balance_of(PAY_TO) == PRICE


async def test_a_settlement_pending_too_long_raises_with_its_transaction(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    url, key = merchant(settle_timeout_s=0.5), new_payer()
    settings = PayerSettings(poll_interval_s=0.05, pending_timeout_s=0.3)

    chain.rpc.call("evm_setAutomine", [False])
    async with await Payer.connect(url, key, settings=settings) as payer:
        with pytest.raises(PaymentPendingError) as caught:
            await payer.pay(TEXT)

    pending = caught.value
    assert (pending.code, pending.signed) == ("payment_pending", True)
    assert pending.transaction is not None
    assert chain.rpc.call("eth_getTransactionByHash", [pending.transaction])["blockNumber"] is None
    # Let the merchant finish, so that it stops cleanly.
    chain.rpc.call("evm_mine")
    assert pending.task_id is not None
    deadline = time.monotonic() + HANG_S
    while await task_state(url, pending.task_id) != "TASK_STATE_COMPLETED":
        assert time.monotonic() < deadline, "the merchant did not complete the task once it was mined"
        await asyncio.sleep(0.05)
    assert chain.balance_of(PAY_TO) == PRICE


async def test_a_merchant_gone_after_its_card_is_unreachable_in_words_not_the_sdks(
    merchant: Callable[..., str], new_payer: Callable[..., str]
) -> None:
    transport = FaultyTransport(
        Fault.LOSE_REQUEST, times=100, select=lambda request: request.method == "POST"
    )

    async with httpx.AsyncClient(timeout=HANG_S, transport=transport) as http:
        async with await Payer.connect(merchant(), new_payer(), http=http, settings=FAST) as payer:
            with pytest.raises(MerchantUnreachableError) as caught:
                await payer.pay(TEXT)

    assert (caught.value.code, caught.value.signed) == ("merchant_unreachable", False)
    assert str(caught.value) == "sending the request failed: the merchant could not be reached (no answer)"
