"""The reconciler's chain scan sees Permit2 payments as it sees EIP-3009 ones (issue 29): a Permit2 payment
to a payTo that no offer was paid with is reported once, keyed by its payer and `p2` nonce as the ledger
keys it; a booked one agrees with the chain; a finalized one whose transaction a reorg took away is found;
a metered (`upto`) one the ledger lost is booked from the chain for the amount settled. The merchant takes
the plain ERC-20 (no EIP-3009), so its `exact` terms ask for Permit2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from a2a_x402.devchain import EXACT_PERMIT2_PROXY_ADDRESS, DevChain
from a2a_x402.facilitator import RpcClient
from a2a_x402.facilitator._permit2_calls import encode_settle
from a2a_x402.facilitator.wire import signer_of
from a2a_x402.merchant._chain_scan import payments_to
from a2a_x402.merchant.differences import _kinds as kinds
from a2a_x402.merchant.ledger import BookedEntry, Ledger
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.storage import create_engine
from tests.facilitator.permit2_chain import funded_payer, parsed, sdk_sign
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    MerchantStarter,
    MerchantWire,
    ledger_entries,
    offered_terms,
    user_message,
)
from tests.merchant.payments.test_metered_settlement import (
    MAXIMUM,
    MeteredExecutor,
    events,
    metered_merchant,
    pay,
)
from tests.merchant.test_reconciler import _sql, open_reconciler, paid_by_permit2


def _settle_directly(chain: DevChain, payment: dict[str, Any]) -> str:
    """Settle `payment` through the exact Permit2 proxy from the deployer, outside any facilitator."""
    signed = parsed(payment).payload
    authorization = signed.permit2_authorization
    calldata = encode_settle(
        authorization, authorization.permitted.amount, bytes.fromhex(signed.signature[2:])
    )
    receipt = chain.rpc.transact(
        chain.deployer_key, to=EXACT_PERMIT2_PROXY_ADDRESS, data=bytes.fromhex(calldata[2:])
    )
    return str(receipt["transactionHash"]).lower()


async def test_a_permit2_payment_no_offer_was_paid_with_is_reported_once_and_not_booked(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter
) -> None:
    merchant = start_merchant(sqlite_url, asset=chain.plain_asset)
    async with merchant.http() as http:
        task = (await MerchantWire(http, "jsonrpc").send(user_message()))["task"]
    merchant.stop()
    payment = sdk_sign(chain, funded_payer(chain, chain.plain_asset), offered_terms(task).accepts[0])
    tx_hash = _settle_directly(chain, payment)
    payer, nonce = signer_of(parsed(payment))

    async with open_reconciler(merchant.settings) as (reconciler, store):
        first = await reconciler.run_once()
        second = await reconciler.run_once()  # read again (within the reorg margin): still one difference
        stored = await store.listed()

    (difference,) = first.differences
    assert (difference.kind, difference.key) == (kinds.UNBOOKED_PAYMENT, f"{payer}:{nonce}")
    assert (
        nonce.startswith("p2")
        and tx_hash in difference.text
        and f"paid to {DEFAULT_PAY_TO}" in difference.text
    )
    assert difference.facts is not None and difference.facts["tx_hash"] == tx_hash
    assert [(d.kind, d.key) for d in second.differences] == [(difference.kind, difference.key)]
    assert [(d.kind, d.key) for d in stored] == [(kinds.UNBOOKED_PAYMENT, f"{payer}:{nonce}")]
    assert (first.booked_from_chain, await ledger_entries(sqlite_url)) == (0, [])


async def _finalized(settings: MerchantSettings, chain: DevChain) -> list[BookedEntry]:
    engine = create_engine(settings.database_url)
    try:
        ledger = Ledger(engine, Outbox(engine))
        return await ledger.finalized_settlements_since(
            chain.chain_id, chain.plain_asset, [DEFAULT_PAY_TO], 0
        )
    finally:
        await engine.dispose()


async def test_a_booked_permit2_payment_is_read_from_the_chain_under_its_ledger_key_and_agrees(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter
) -> None:
    settings, _ = await paid_by_permit2(sqlite_url, chain, start_merchant)
    (booked,) = await ledger_entries(sqlite_url)

    rpc = RpcClient(chain.rpc_url)
    try:
        (seen,) = await payments_to(
            rpc,
            chain.plain_asset,
            [DEFAULT_PAY_TO],
            from_block=booked.block_number,
            to_block=booked.block_number,
            batch_blocks=1,
        )
    finally:
        await rpc.aclose()
    async with open_reconciler(settings) as (reconciler, store):
        first = await reconciler.run_once()
        second = await reconciler.run_once()
        stored = await store.listed()

    (entry,) = await _finalized(settings, chain)
    assert entry.nonce.startswith("p2")
    assert (seen.payer, seen.nonce, seen.pay_to, seen.amount, seen.tx_hash, seen.block_number) == (
        entry.payer,
        entry.nonce,
        entry.pay_to,
        entry.amount,
        entry.tx_hash,
        entry.block_number,
    )
    assert (first.finalized, first.booked_from_chain, first.differences) == (1, 0, [])
    assert (second.finalized, second.differences, stored) == (0, [], [])


async def test_a_finalized_permit2_booking_a_reorg_took_away_is_reported(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter
) -> None:
    settings, _ = await paid_by_permit2(sqlite_url, chain, start_merchant)
    async with open_reconciler(settings) as (reconciler, _):
        assert (await reconciler.run_once()).finalized == 1
    (entry,) = await _finalized(settings, chain)
    chain.rpc.call("evm_setAutomine", [False])  # nothing is mined again
    chain.rpc.call("anvil_rollback", [1])
    chain.rpc.call("anvil_dropAllTransactions")
    assert chain.rpc.call("eth_getTransactionReceipt", [entry.tx_hash]) is None

    async with open_reconciler(settings) as (reconciler, store):
        report = await reconciler.run_once()
        stored = await store.listed()

    (difference,) = report.differences
    assert (difference.kind, difference.key) == (kinds.REORGED_OUT, entry.id)
    assert difference.text.startswith(f"{entry.id}: finalized, but {entry.tx_hash} is no longer on the chain")
    assert [(d.kind, d.key) for d in stored] == [(kinds.REORGED_OUT, entry.id)]


@pytest.mark.error_logs("why: a trigger makes the ledger refuse the booking")
async def test_a_metered_payment_the_ledger_lost_is_booked_from_the_chain_for_what_it_settled_once(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    used = 7 * 25
    await _sql(
        sqlite_url,
        "CREATE TRIGGER refuse_bookings BEFORE INSERT ON ledger_entries"
        " BEGIN SELECT RAISE(ABORT, 'the ledger is unavailable'); END",
    )
    merchant = metered_merchant(start_merchant, sqlite_url, tmp_path, MeteredExecutor([("tokens", 7, 25)]))
    payer, task, done = await pay(chain, merchant)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    merchant.stop()
    # The offer says booked, the ledger has nothing: only the chain shows the payment, below the maximum.
    await _sql(
        sqlite_url, "DROP TRIGGER refuse_bookings", "UPDATE payment_offers SET booked_at = CURRENT_TIMESTAMP"
    )
    assert await ledger_entries(sqlite_url) == []

    async with open_reconciler(merchant.settings) as (reconciler, store):
        first = await reconciler.run_once()
        second = await reconciler.run_once()
        stored = await store.listed()

    assert (first.booked_from_chain, first.differences) == (1, [])
    assert (second.booked_from_chain, second.differences, stored) == (0, [], [])
    assert [(e.task_id, e.payer, e.amount) for e in await ledger_entries(sqlite_url)] == [
        (task["id"], payer, used)
    ]
    [booked] = [e["data"] for e in await events(sqlite_url) if e["type"] == "settlement.completed"]
    assert (booked["amount"], booked["maximum"]) == (str(used), str(MAXIMUM))
