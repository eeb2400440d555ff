"""`exact` by Permit2 through the reference merchant, end to end on the dev chain: its plain ERC-20 (no
EIP-3009) asked for with `extra.assetTransferMethod: "permit2"`, paid with what the x402 Python SDK's client
signs, settled by the in-process facilitator, booked, and every way it must not be taken."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from eth_account import Account

from a2a_x402.devchain import PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION, DevChain
from a2a_x402.extension import EXTENSION_URI_V02
from a2a_x402.facilitator.wire import PaymentRequirements
from a2a_x402.merchant.payments._handler import USED_ELSEWHERE
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import relayer_nonce
from tests.facilitator.permit2_chain import funded_payer, sdk_sign
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    payment_message,
)

from .flows import JSON, V03Client, extension, offer, state_of, texts

PERMIT2_AT_START = "permit2"


@pytest.fixture
def permit2_merchant(start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain) -> RunningMerchant:
    """The reference merchant asking for the dev chain's plain ERC-20, its transfer method found at start-up
    (`X402_ASSET_TRANSFER_METHOD` left at `auto`)."""
    return start_merchant(sqlite_url, asset=chain.plain_asset)


@pytest.fixture
async def permit2_wire(permit2_merchant: RunningMerchant, binding: str) -> AsyncIterator[MerchantWire]:
    """Raw A2A calls to `permit2_merchant` over the binding under test."""
    async with permit2_merchant.http() as client:
        yield MerchantWire(client, binding)


def terms_of(task: JSON) -> PaymentRequirements:
    [requirements] = offered_terms(task).accepts
    return requirements


def address_of(key: str) -> str:
    return str(Account.from_key(key).address)


def balances(chain: DevChain, payer: str) -> tuple[int, int, int]:
    """The payer's and the payee's plain-token balances, and the relayer's transaction count."""
    plain = chain.plain_asset
    return (
        chain.balance_of(payer, asset=plain),
        chain.balance_of(DEFAULT_PAY_TO, asset=plain),
        relayer_nonce(chain),
    )


def history_payments(task: JSON) -> list[Any]:
    """The payment-submitted values kept in a task's history."""
    found = []
    for message in task.get("history", []):
        for value in (message.get("metadata") or {}).values():
            if isinstance(value, dict) and value.get("status") == "payment-submitted":
                found.append(value["payload"])
    return found


async def test_the_terms_of_a_token_without_eip3009_ask_for_permit2(
    permit2_merchant: RunningMerchant, chain: DevChain
) -> None:
    async with permit2_merchant.http() as client:
        task = await offer(MerchantWire(client, "jsonrpc"))
    terms = terms_of(task)
    assert (terms.scheme, terms.asset, terms.amount) == ("exact", chain.plain_asset, DEFAULT_PRICE)
    assert terms.extra is not None and terms.extra["assetTransferMethod"] == PERMIT2_AT_START


async def test_the_terms_of_an_eip3009_token_say_no_transfer_method(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain
) -> None:
    merchant = start_merchant(sqlite_url)
    async with merchant.http() as client:
        terms = terms_of(await offer(MerchantWire(client, "jsonrpc")))
    assert terms.asset == chain.asset
    assert terms.extra is not None and "assetTransferMethod" not in terms.extra


async def test_a_permit2_payment_settles_delivers_and_is_booked(
    permit2_wire: MerchantWire, permit2_merchant: RunningMerchant, chain: DevChain
) -> None:
    key = funded_payer(chain, chain.plain_asset)
    payer = address_of(key)
    task = await offer(permit2_wire)
    before = balances(chain, payer)
    payment = sdk_sign(chain, key, terms_of(task))

    done = (await permit2_wire.send(payment_message(task["id"], payment)))["task"]

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    data = extension(done)
    assert data["status"] == "payment-completed"
    [receipt] = data["receipts"]
    tx_hash = receipt["transaction"]
    on_chain = chain.rpc.call("eth_getTransactionReceipt", [tx_hash])
    assert int(on_chain["status"], 16) == 1
    assert (receipt["success"], receipt["payer"], receipt["network"]) == (True, payer, chain.network)
    assert texts(done) == [f"Payment settled in transaction {tx_hash}."]
    after = balances(chain, payer)
    assert (after[0], after[1]) == (before[0] - DEFAULT_PRICE, before[1] + DEFAULT_PRICE)
    [entry] = await ledger_entries(permit2_merchant.database_url)
    assert (entry.task_id, entry.payer, entry.pay_to, entry.asset) == (
        task["id"],
        payer,
        DEFAULT_PAY_TO,
        chain.plain_asset,
    )
    assert (entry.amount, entry.tx_hash, entry.block_number) == (
        DEFAULT_PRICE,
        tx_hash,
        int(on_chain["blockNumber"], 16),
    )
    # The task's history keeps the payment without its signature; the authorization is still all there.
    [kept] = history_payments(await permit2_wire.get_task(task["id"]))
    assert "signature" not in kept["payload"]
    assert kept["payload"]["permit2Authorization"] == payment["payload"]["permit2Authorization"]


async def test_a_permit2_payment_replayed_for_another_task_is_refused_and_moves_nothing(
    permit2_wire: MerchantWire, permit2_merchant: RunningMerchant, chain: DevChain
) -> None:
    key = funded_payer(chain, chain.plain_asset)
    first = await offer(permit2_wire)
    payment = sdk_sign(chain, key, terms_of(first))
    paid = (await permit2_wire.send(payment_message(first["id"], payment)))["task"]
    assert paid["status"]["state"] == "TASK_STATE_COMPLETED", paid["status"]
    task = await offer(permit2_wire)
    before = balances(chain, address_of(key))

    # `accepted` is not signed: swapped for this task's terms, the same Permit2 nonce pays them exactly.
    replayed = {**payment, "accepted": terms_of(task).to_json_dict()}
    with pytest.raises(A2ACallError) as refused:
        await permit2_wire.send(payment_message(task["id"], replayed))

    assert (refused.value.reason, refused.value.message) == ("INVALID_PARAMS", USED_ELSEWHERE)
    assert (await permit2_wire.get_task(task["id"]))["status"] == task["status"]
    assert balances(chain, address_of(key)) == before
    assert len(await ledger_entries(permit2_merchant.database_url)) == 1


async def test_a_payer_that_never_approved_permit2_is_told_to_and_charged_nothing(
    permit2_wire: MerchantWire, permit2_merchant: RunningMerchant, chain: DevChain
) -> None:
    key = funded_payer(chain, chain.plain_asset, approved=False)
    task = await offer(permit2_wire)
    before = balances(chain, address_of(key))

    failed = (await permit2_wire.send(payment_message(task["id"], sdk_sign(chain, key, terms_of(task)))))[
        "task"
    ]

    assert failed["status"]["state"] == "TASK_STATE_FAILED", failed["status"]
    data = extension(failed)
    assert (data["status"], data["error"], data["receipts"]) == ("payment-failed", "SETTLEMENT_FAILED", [])
    [text] = texts(failed)
    assert "has not approved Permit2" in text and "approve Permit2 on the token once" in text
    assert "artifacts" not in failed
    assert balances(chain, address_of(key)) == before
    assert await ledger_entries(permit2_merchant.database_url) == []


async def test_an_eip3009_authorization_does_not_pay_permit2_terms(
    permit2_wire: MerchantWire, permit2_merchant: RunningMerchant, chain: DevChain
) -> None:
    task = await offer(permit2_wire)
    terms = terms_of(task)
    key = chain.new_payer()
    before = balances(chain, address_of(key))

    with pytest.raises(A2ACallError) as refused:
        await permit2_wire.send(payment_message(task["id"], sign_payment(key, terms)))

    assert refused.value.message == "the payment does not match the terms offered for this task"
    assert (await permit2_wire.get_task(task["id"]))["status"] == task["status"]
    assert balances(chain, address_of(key)) == before
    assert await ledger_entries(permit2_merchant.database_url) == []


async def test_a_payer_without_allowance_pays_with_an_eip2612_permit_of_permit2(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain
) -> None:
    merchant = start_merchant(
        sqlite_url,
        asset=chain.permit_asset,
        asset_name=PERMIT_ASSET_NAME,
        asset_version=PERMIT_ASSET_VERSION,
    )
    key = funded_payer(chain, chain.permit_asset, approved=False)
    payer = address_of(key)
    async with merchant.http() as client:
        wire = MerchantWire(client, "jsonrpc")
        task = await offer(wire)
        terms = terms_of(task)
        assert terms.extra is not None and terms.extra["assetTransferMethod"] == PERMIT2_AT_START
        before = chain.balance_of(payer, asset=chain.permit_asset)
        payment = sdk_sign(chain, key, terms, eip2612=True)
        assert "eip2612GasSponsoring" in payment["extensions"]

        done = (await wire.send(payment_message(task["id"], payment)))["task"]
        [kept] = history_payments(await wire.get_task(task["id"]))

    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    assert chain.balance_of(payer, asset=chain.permit_asset) == before - DEFAULT_PRICE
    [entry] = await ledger_entries(merchant.database_url)
    assert (entry.payer, entry.asset, entry.amount) == (payer, chain.permit_asset, DEFAULT_PRICE)
    # Neither signature stays in the task's history: the payment's, nor the EIP-2612 permit's.
    assert "signature" not in kept["payload"]
    assert "signature" not in kept["extensions"]["eip2612GasSponsoring"]["info"]


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
async def test_an_a2a_0_3_client_is_offered_x402_v2_terms_and_pays_them_by_permit2(
    permit2_merchant: RunningMerchant, chain: DevChain, binding: str
) -> None:
    key = funded_payer(chain, chain.plain_asset)
    headers = {"X-A2A-Extensions": EXTENSION_URI_V02}
    async with httpx.AsyncClient(base_url=permit2_merchant.base_url, headers=headers, timeout=30) as http:
        client = V03Client(http, binding)
        task = await client.send("The quick brown fox.")
        terms = task["status"]["message"]["metadata"]["x402.payment.required"]
        # x402 v1 has no Permit2 payment: the terms travel as x402 v2 on extension v0.2 too.
        assert terms["x402Version"] == 2
        [offered] = terms["accepts"]
        assert offered["extra"]["assetTransferMethod"] == PERMIT2_AT_START
        payment = sdk_sign(chain, key, PaymentRequirements.from_wire(offered))
        submission = {"x402.payment.status": "payment-submitted", "x402.payment.payload": payment}

        done = await client.send("Here is my payment.", task_id=task["id"], metadata=submission)

    assert state_of(done) == "completed", done["status"]
    completed = done["status"]["message"]["metadata"]
    assert completed["x402.payment.status"] == "payment-completed"
    [receipt] = completed["x402.payment.receipts"]
    assert receipt["success"] is True and receipt["network"] == chain.network  # a v2 receipt: CAIP-2
    [entry] = await ledger_entries(permit2_merchant.database_url)
    assert (entry.task_id, entry.asset, entry.amount) == (task["id"], chain.plain_asset, DEFAULT_PRICE)
