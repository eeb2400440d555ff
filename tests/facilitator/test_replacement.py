"""Fee spikes on anvil: a settlement whose maxFeePerGas a raised base fee left behind is replaced with its
nonce and higher fees; whichever of the two is mined (the replacement, or the original overtaking it) is
the settlement, exactly once (for each transfer method: EIP-3009, `exact` and `upto` by Permit2); at the fee
ceiling the key takes no new work until the base fee falls. And
a next nonce the node holds queued without mining it is sent again and replaced, and the rest follow.

anvil mines nothing here until the test says so (automine off), so transactions priced under the next
block's base fee (`anvil_setNextBlockBaseFeePerGas`) stay in its pool, as on a busy chain.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import AUTHORIZATION_USED_TOPIC, Facilitator, bumped_fees
from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentRequirements,
    Permit2PaymentPayload,
    SettleResponse,
)
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator import make_requirements

from .conftest import OpenFacilitator
from .payments import claim_rows, relayer_address, relayer_nonce
from .permit2_chain import AMOUNT, funded_payer, parsed, permit2_requirements, sdk_sign

GWEI = 10**9
# Replacements are considered after this long under the base fee (the checks run at half of it).
BUMP_AFTER_S = 0.5


def test_bumped_fees_raise_both_caps_by_more_than_the_replacement_rule_and_keep_to_the_ceiling() -> None:
    max_fee, tip = bumped_fees(3 * GWEI, GWEI, base_fee=2 * GWEI, ceiling=None) or (0, 0)
    assert max_fee * 100 >= 3 * GWEI * 110 and tip * 100 >= GWEI * 110
    # Under a base fee of 10 gwei the new cap covers twice that plus the tip, as a fresh send would.
    assert bumped_fees(3 * GWEI, GWEI, base_fee=10 * GWEI, ceiling=None) == (20 * GWEI + tip, tip)
    assert bumped_fees(3 * GWEI, GWEI, base_fee=10 * GWEI, ceiling=15 * GWEI) == (15 * GWEI, tip)
    # A ceiling leaving less than +10 % leaves no replacement the node would take.
    assert bumped_fees(3 * GWEI, GWEI, base_fee=10 * GWEI, ceiling=3 * GWEI * 109 // 100) is None


def _pool(chain: DevChain) -> dict[int, dict[str, Any]]:
    """The relayer's transactions in anvil's pool, by nonce."""
    pending = chain.rpc.call("txpool_content")["pending"]
    ours: dict[str, Any] = next(
        (txs for sender, txs in pending.items() if sender.lower() == relayer_address(chain).lower()), {}
    )
    return {int(nonce): tx for nonce, tx in ours.items()}


def _nonce_of(chain: DevChain, tx_hash: str) -> int:
    return int(chain.rpc.call("eth_getTransactionByHash", [tx_hash])["nonce"], 16)


def _next_base_fee(chain: DevChain) -> int:
    return int(chain.rpc.call("eth_getBlockByNumber", ["pending", False])["baseFeePerGas"], 16)


def _uses(chain: DevChain, from_block: int) -> Counter[str]:
    """How often each authorization nonce was used since `from_block`."""
    logs = chain.rpc.call(
        "eth_getLogs",
        [
            {
                "address": chain.asset,
                "fromBlock": hex(from_block),
                "toBlock": "latest",
                "topics": [AUTHORIZATION_USED_TOPIC],
            }
        ],
    )
    return Counter(log["topics"][2] for log in logs)


async def _sent_rows(database_url: str) -> list[dict[str, Any]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            statement = sa.text("SELECT * FROM settlement_transactions ORDER BY sent_at")
            return [dict(row) for row in (await connection.execute(statement)).mappings().all()]
    finally:
        await engine.dispose()


async def _spiked(
    chain: DevChain,
    facilitator: Facilitator,
    payments: Sequence[PaymentPayload | Permit2PaymentPayload],
    requirements: Any,
) -> tuple[list[asyncio.Task[SettleResponse]], dict[int, dict[str, Any]]]:
    """Start settling `payments` with mining off, then raise the next base fee over their fee caps.

    Returns the settles under way and the originals as anvil's pool held them, by nonce."""
    chain.rpc.call("evm_setAutomine", [False])
    settles = [asyncio.create_task(facilitator.settle(p, requirements)) for p in payments]
    await wait_until(lambda: len(_pool(chain)) == len(payments), what="every settlement to reach the pool")
    originals = _pool(chain)
    highest = max(int(tx["maxFeePerGas"], 16) for tx in originals.values())
    chain.rpc.call("anvil_setNextBlockBaseFeePerGas", [hex(3 * highest)])
    return settles, originals


def _payment(
    chain: DevChain, new_payer: Callable[..., str], method: str
) -> tuple[PaymentPayload | Permit2PaymentPayload, PaymentRequirements]:
    """A fresh payer's payment by `method` (EIP-3009, or `exact`/`upto` by Permit2: an `upto` one settled
    for a third of its maximum) and the requirements it is settled with."""
    if method == "eip3009":
        requirements = make_requirements(chain)
        return sign_payment(new_payer(), requirements), requirements
    asked = permit2_requirements(chain, method, chain.plain_asset)
    payment = parsed(sdk_sign(chain, funded_payer(chain, asked.asset), asked))
    return payment, asked if method == "exact" else asked.model_copy(update={"amount": AMOUNT // 3})


def _each_used_once(
    chain: DevChain, payments: Sequence[PaymentPayload | Permit2PaymentPayload], first_block: int
) -> None:
    """Each payment's authorization was used, once: by its EIP-3009 event, or its bit in Permit2."""
    eip3009 = [p.payload.authorization.nonce for p in payments if isinstance(p, PaymentPayload)]
    assert _uses(chain, first_block) == Counter(dict.fromkeys(eip3009, 1))
    for payment in payments:
        if isinstance(payment, Permit2PaymentPayload):
            permit = payment.payload.permit2_authorization
            assert chain.permit2_nonce_used(permit.from_address, permit.nonce)


@pytest.mark.parametrize("method", ["eip3009", "exact", "upto"])
async def test_settlements_under_a_spiked_base_fee_are_replaced_and_the_replacements_settle(
    method: str,
    chain: DevChain,
    sqlite_url: str,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
) -> None:
    facilitator = await open_facilitator(sqlite_url, fee_bump_after_s=BUMP_AFTER_S, receipt_timeout_s=60)
    (first, requirements), (second, _) = (_payment(chain, new_payer, method) for _ in range(2))
    payments = [first, second]
    payee_before = chain.balance_of(requirements.pay_to, asset=requirements.asset)
    first_block, nonce_before = int(chain.rpc.call("eth_blockNumber"), 16) + 1, relayer_nonce(chain)

    settles, originals = await _spiked(chain, facilitator, payments, requirements)
    # Both nonces are replaced: the later one too, or it would wait behind the first without end.
    await wait_until(lambda: facilitator.replacements_sent >= 2, what="both settlements to be replaced")
    replacements = _pool(chain)
    chain.rpc.call("evm_mine")
    answers = await asyncio.gather(*settles)

    assert all(a.success for a in answers), answers
    assert {a.transaction for a in answers} == {tx["hash"] for tx in replacements.values()}
    assert {a.transaction for a in answers}.isdisjoint(tx["hash"] for tx in originals.values())
    for nonce, tx in replacements.items():
        old = originals[nonce]
        assert int(tx["maxFeePerGas"], 16) * 100 >= int(old["maxFeePerGas"], 16) * 110
        assert int(tx["maxPriorityFeePerGas"], 16) * 100 >= int(old["maxPriorityFeePerGas"], 16) * 110
    assert relayer_nonce(chain) == nonce_before + 2  # gap-free: one nonce per settlement
    _each_used_once(chain, payments, first_block)
    paid = chain.balance_of(requirements.pay_to, asset=requirements.asset) - payee_before
    assert paid == 2 * requirements.amount
    rows = await claim_rows(sqlite_url)
    assert {(row["state"], row["tx_hash"]) for row in rows} == {("succeeded", a.transaction) for a in answers}
    # Every hash sent for a claim is recorded: the original and its replacement.
    sent = await _sent_rows(sqlite_url)
    assert Counter(row["claim_id"] for row in sent) == Counter({row["id"]: 2 for row in rows})
    assert {row["tx_hash"] for row in sent} == {
        tx["hash"] for tx in (*originals.values(), *replacements.values())
    }


# For each transfer method (an `upto` family is sent from the key its payer named): whichever member is
# mined, the claim follows it, the payee is paid once and the authorization used once.
@pytest.mark.parametrize("method", ["eip3009", "exact", "upto"])
async def test_an_original_mined_before_its_replacement_is_the_settlement(
    method: str,
    chain: DevChain,
    sqlite_url: str,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
) -> None:
    facilitator = await open_facilitator(sqlite_url, fee_bump_after_s=BUMP_AFTER_S, receipt_timeout_s=60)
    payment, requirements = _payment(chain, new_payer, method)
    payee_before = chain.balance_of(requirements.pay_to, asset=requirements.asset)
    first_block, base_fee = int(chain.rpc.call("eth_blockNumber"), 16) + 1, _next_base_fee(chain)

    (settle,), originals = await _spiked(chain, facilitator, [payment], requirements)

    # The rows, not the counter, which the bumper moves as it sends, a moment before it records them.
    async def both_recorded() -> bool:
        return len(await _sent_rows(sqlite_url)) == 2

    await wait_until(both_recorded, what="the settlement and its replacement to be recorded")
    assert facilitator.replacements_sent >= 1
    (original, replacement) = await _sent_rows(sqlite_url)
    # The spike passes and a block producer that never saw the replacement mines the original.
    chain.rpc.call("anvil_dropTransaction", [replacement["tx_hash"]])
    chain.rpc.call("anvil_setNextBlockBaseFeePerGas", [hex(base_fee)])
    chain.rpc.call("eth_sendRawTransaction", [original["raw_tx"]])
    chain.rpc.call("evm_mine")
    answer = await settle

    assert answer.success, answer
    assert answer.transaction == original["tx_hash"] == next(iter(originals.values()))["hash"]
    _each_used_once(chain, [payment], first_block)
    paid = chain.balance_of(requirements.pay_to, asset=requirements.asset) - payee_before
    assert paid == requirements.amount  # once
    (row,) = await claim_rows(sqlite_url)
    assert (row["state"], row["tx_hash"]) == ("succeeded", original["tx_hash"])
    assert chain.rpc.call("eth_getTransactionReceipt", [replacement["tx_hash"]]) is None


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_a_key_at_the_fee_ceiling_takes_no_new_work_until_the_base_fee_falls(
    database: str,
    chain: DevChain,
    sqlite_url: str,
    postgres_url: str,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
) -> None:
    database_url = sqlite_url if database == "sqlite" else postgres_url
    base_fee = _next_base_fee(chain)
    tip = int(chain.rpc.call("eth_maxPriorityFeePerGas"), 16)
    # Room for the first send (twice the base fee plus the tip) but not for a +10 % replacement.
    ceiling = (2 * base_fee + tip) * 105 // 100
    facilitator = await open_facilitator(
        database_url, fee_bump_after_s=BUMP_AFTER_S, receipt_timeout_s=60, max_fee_per_gas=ceiling
    )
    requirements = make_requirements(chain)
    payment = sign_payment(new_payer(), requirements)

    (settle,), originals = await _spiked(chain, facilitator, [payment], requirements)
    await wait_until(lambda: not facilitator.relayer_states()[0].usable, what="the key to be marked stuck")
    (state,) = facilitator.relayer_states()
    assert state.reason == "oldest transaction stuck" and state.in_flight == 1
    assert facilitator.replacements_sent == 0
    chain.rpc.call("anvil_setNextBlockBaseFeePerGas", [hex(base_fee)])
    await wait_until(lambda: facilitator.relayer_states()[0].usable, what="the key to take work again")
    chain.rpc.call("evm_mine")
    answer = await settle

    assert answer.success and answer.transaction == next(iter(originals.values()))["hash"], answer


def _queued(chain: DevChain) -> dict[int, dict[str, Any]]:
    """The relayer's transactions anvil holds as queued (waiting for an earlier nonce), by nonce."""
    queued = chain.rpc.call("txpool_content")["queued"]
    ours: dict[str, Any] = next(
        (txs for sender, txs in queued.items() if sender.lower() == relayer_address(chain).lower()), {}
    )
    return {int(nonce): tx for nonce, tx in ours.items()}


@dataclass
class _Queued:
    """Three settlements anvil holds queued behind a nonce the account lacks (it is one back)."""

    payments: list[PaymentPayload]
    settles: list[asyncio.Task[SettleResponse]]
    held: dict[int, dict[str, Any]]  # the relayer's queued transactions, by nonce
    nonce: int  # the relayer's next nonce, the first of the three
    first_block: int


async def _three_queued(chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str]) -> _Queued:
    """What anvil's race leaves: a next nonce filed as queued behind a predecessor it no longer has. With the
    account one nonce back, anvil queues our next nonce (and the ones after it) behind the missing one; the
    caller then moves the account to that nonce, and anvil never promotes what it queued."""
    requirements = make_requirements(chain)
    assert (await facilitator.settle(sign_payment(new_payer(), requirements), requirements)).success
    payments = [sign_payment(new_payer(), requirements) for _ in range(3)]
    relayer, nonce = relayer_address(chain), relayer_nonce(chain)
    first_block = int(chain.rpc.call("eth_blockNumber"), 16) + 1
    chain.rpc.call("anvil_setNonce", [relayer, hex(nonce - 1)])
    settles = [asyncio.create_task(facilitator.settle(p, requirements)) for p in payments]
    await wait_until(lambda: len(_queued(chain)) == 3, what="the settlements to be queued")
    return _Queued(payments, settles, _queued(chain), nonce, first_block)


async def test_a_next_nonce_the_node_holds_queued_is_sent_again_and_replaced_and_the_rest_follow(
    chain: DevChain,
    sqlite_url: str,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    facilitator = await open_facilitator(sqlite_url, relayer_revive_after_s=0.5, receipt_timeout_s=60)
    queued = await _three_queued(chain, facilitator, new_payer)
    payments, held, nonce, first_block = queued.payments, queued.held, queued.nonce, queued.first_block
    chain.rpc.call("anvil_setNonce", [relayer_address(chain), hex(nonce)])
    with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
        answers = await asyncio.gather(*queued.settles)

    assert all(a.success for a in answers), answers
    assert sorted(held) == [nonce, nonce + 1, nonce + 2]
    # Sent again first; anvil answers it holds it already, so it is replaced on the spot.
    assert "unmined while later nonces wait; replacing it" in caplog.text
    assert facilitator.replacements_sent == 1
    # The held next nonce was replaced; the two behind it were promoted and mined as sent.
    replaced = held[nonce]["hash"]
    (replacement,) = {a.transaction for a in answers} - {tx["hash"] for tx in held.values()}
    assert _nonce_of(chain, replacement) == nonce
    assert chain.rpc.call("eth_getTransactionReceipt", [replaced]) is None
    assert relayer_nonce(chain) == nonce + 3  # gap-free: one nonce per settlement
    assert _uses(chain, first_block) == Counter({p.payload.authorization.nonce: 1 for p in payments})
    rows = await claim_rows(sqlite_url)
    assert {
        (row["state"], row["tx_hash"]) for row in rows if row["tx_hash"] in {a.transaction for a in answers}
    } == {("succeeded", a.transaction) for a in answers}
    # The claim followed the replacement: both of its hashes are recorded for it.
    assert {row["tx_hash"] for row in await _sent_rows(sqlite_url)} == {replaced, replacement}


async def test_a_next_nonce_the_node_dropped_is_sent_again_and_mined_as_signed(
    chain: DevChain,
    sqlite_url: str,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    facilitator = await open_facilitator(sqlite_url, relayer_revive_after_s=0.5, receipt_timeout_s=60)
    queued = await _three_queued(chain, facilitator, new_payer)
    payments, held, nonce, first_block = queued.payments, queued.held, queued.nonce, queued.first_block
    # Then anvil's pool is emptied and only the two behind the first are given back, at the account's
    # nonce: they wait on one the node lacks.
    behind = [
        chain.rpc.call("eth_getRawTransactionByHash", [held[n]["hash"]]) for n in (nonce + 1, nonce + 2)
    ]
    chain.rpc.call("anvil_dropAllTransactions", [])
    chain.rpc.call("anvil_setNonce", [relayer_address(chain), hex(nonce)])
    for raw in behind:
        chain.rpc.call("eth_sendRawTransaction", [raw])
    with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
        answers = await asyncio.gather(*queued.settles)

    assert all(a.success for a in answers), answers
    # Sent again, the node takes it anew: no replacement, every settlement mined as first signed.
    assert "the node had dropped" in caplog.text
    assert facilitator.replacements_sent == 0
    assert {a.transaction for a in answers} == {tx["hash"] for tx in held.values()}
    assert relayer_nonce(chain) == nonce + 3
    assert _uses(chain, first_block) == Counter({p.payload.authorization.nonce: 1 for p in payments})


async def test_a_next_nonce_waiting_for_a_slow_block_is_neither_sent_again_nor_replaced(
    chain: DevChain,
    sqlite_url: str,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    facilitator = await open_facilitator(sqlite_url, relayer_revive_after_s=0.5, receipt_timeout_s=60)
    requirements = make_requirements(chain)
    payments = [sign_payment(new_payer(), requirements) for _ in range(3)]

    chain.rpc.call("evm_setAutomine", [False])
    settles = [asyncio.create_task(facilitator.settle(p, requirements)) for p in payments]
    await wait_until(lambda: len(_pool(chain)) == 3, what="the settlements to reach the pool")
    originals = _pool(chain)
    with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
        await asyncio.sleep(2.5)  # past twice the revive delay, with later nonces waiting
    chain.rpc.call("evm_mine")
    answers = await asyncio.gather(*settles)

    assert all(a.success for a in answers), answers
    assert {a.transaction for a in answers} == {tx["hash"] for tx in originals.values()}
    assert "replacing it" not in caplog.text and "sent again" not in caplog.text
    assert facilitator.replacements_sent == 0
