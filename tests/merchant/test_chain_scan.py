"""The reconciler's chain scan (`merchant._chain_scan`) on the dev chain: EIP-3009 payments to the payTo
addresses asked for, each paired with its authorization, read the same in one range or block by block;
plain transfers, other payees and transfers next to someone else's authorization are not payments to report;
the authorizations come from the matching transactions' receipts. A Permit2 transfer is paired with the
next permit of its sender that the transaction settled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import AUTHORIZATION_USED_TOPIC, TRANSFER_TOPIC, RpcClient, SettledPermit
from a2a_x402.facilitator.wire import permit2_nonce_key
from a2a_x402.merchant._chain_scan import ChainPayment, pair_payments, pair_permit2_payments, payments_to
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import submit_directly
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.merchant import DEFAULT_PAY_TO, TWO_TENANTS

from .recording_rpc import RecordingRpc


def _head(chain: DevChain) -> int:
    return int(chain.rpc.call("eth_blockNumber"), 16)


async def test_payments_to_the_asked_payees_are_read_with_their_authorizations_in_any_batch_size(
    chain: DevChain, new_payer: Callable[..., str]
) -> None:
    acme = TWO_TENANTS["acme"][0]
    first = _head(chain) + 1
    payloads = [
        sign_payment(new_payer(), make_requirements(chain, pay_to=pay_to, amount=amount))
        for pay_to, amount in ((DEFAULT_PAY_TO, 1_000), (acme, 2_000), (PAY_TO, 3_000))
    ]
    for payload in payloads:
        submit_directly(chain, payload)
    chain.mint(DEFAULT_PAY_TO, 5_000)  # a transfer to the payee, but no authorization was used
    last = _head(chain)

    rpc = RpcClient(chain.rpc_url)
    try:
        scans = [
            await payments_to(
                rpc, chain.asset, [DEFAULT_PAY_TO, acme], from_block=first, to_block=last, batch_blocks=batch
            )
            for batch in (1, 2, 1_000)
        ]
        outside = await payments_to(
            rpc, chain.asset, [DEFAULT_PAY_TO, acme], from_block=last, to_block=last, batch_blocks=1
        )
    finally:
        await rpc.aclose()

    authorizations = [p.payload.authorization for p in payloads[:2]]
    assert [(p.payer, p.nonce, p.pay_to, p.amount) for p in scans[0]] == [
        (a.from_address, a.nonce.lower(), a.to, a.value) for a in authorizations
    ]
    assert all(isinstance(p, ChainPayment) and first <= p.block_number < last for p in scans[0])
    assert scans[0] == scans[1] == scans[2]
    assert outside == []  # the last block holds only the mint


async def test_authorizations_come_from_the_receipts_of_the_matching_transfers_not_from_unfiltered_logs(
    chain: DevChain, new_payer: Callable[..., str]
) -> None:
    first = _head(chain) + 1
    for pay_to in (DEFAULT_PAY_TO, PAY_TO, PAY_TO, DEFAULT_PAY_TO):
        _pay(chain, new_payer(), pay_to, 1_000)
    last = _head(chain)

    rpc = RecordingRpc(chain.rpc_url)
    try:
        payments = await payments_to(
            rpc, chain.asset, [DEFAULT_PAY_TO], from_block=first, to_block=last, batch_blocks=1_000
        )
    finally:
        await rpc.aclose()

    assert len(payments) == 2
    # One log query, for transfers to the payTo only: the token's other logs are never downloaded.
    ((query,),) = rpc.made("eth_getLogs")
    assert query["topics"] == [TRANSFER_TOPIC, None, ["0x" + DEFAULT_PAY_TO[2:].lower().rjust(64, "0")]]
    assert sorted(params[0] for params in rpc.made("eth_getTransactionReceipt")) == sorted(
        p.tx_hash for p in payments
    )


def _pay(chain: DevChain, payer_key: str, pay_to: str, amount: int) -> dict[str, Any]:
    """`payer_key` pays `pay_to` with an authorization, submitted directly; the receipt."""
    submit_directly(chain, sign_payment(payer_key, make_requirements(chain, pay_to=pay_to, amount=amount)))
    block = chain.rpc.call("eth_getBlockByNumber", ["latest", False])
    receipt: dict[str, Any] = chain.rpc.call("eth_getTransactionReceipt", [block["transactions"][-1]])
    return receipt


def _in_one_transaction(*logs: dict[str, Any]) -> list[dict[str, Any]]:
    """`logs` (taken from different receipts) as one batched transaction would emit them, in this order."""
    tx_hash = logs[0]["transactionHash"]
    return [{**log, "transactionHash": tx_hash, "logIndex": hex(index)} for index, log in enumerate(logs)]


def test_a_transfer_to_the_payee_is_paired_only_with_its_own_senders_authorization_from_the_token(
    chain: DevChain, new_payer: Callable[..., str]
) -> None:
    # Real logs from the dev chain: A pays someone else with an authorization, B pays the payee with one.
    a_used, a_transfer = _pay(chain, new_payer(), PAY_TO, 1_000)["logs"]
    b_used, b_transfer = _pay(chain, new_payer(), DEFAULT_PAY_TO, 7)["logs"]
    assert (a_used["topics"][0], b_transfer["topics"][0]) == (AUTHORIZATION_USED_TOPIC, TRANSFER_TOPIC)
    payees = {DEFAULT_PAY_TO}

    (own,) = pair_payments([b_used, b_transfer], chain.asset, payees)
    assert (own.pay_to, own.amount, own.nonce) == (DEFAULT_PAY_TO, 7, b_used["topics"][2].lower())
    # B's transfer (as a plain transfer) batched right after A's authorization is not A's payment.
    assert pair_payments(_in_one_transaction(a_used, b_transfer), chain.asset, payees) == []
    # Nor after an AuthorizationUsed log that another contract emitted.
    forged = {**b_used, "address": PAY_TO}
    assert pair_payments(_in_one_transaction(forged, b_transfer), chain.asset, payees) == []
    # A's own payment to someone else, batched before B's plain transfer, lends B nothing.
    assert pair_payments(_in_one_transaction(a_used, a_transfer, b_transfer), chain.asset, payees) == []


def _transfer(asset: str, sender: str, receiver: str, amount: int, index: int) -> dict[str, Any]:
    """A token `Transfer` log as a receipt holds it."""
    words = ["0x" + address[2:].lower().rjust(64, "0") for address in (sender, receiver)]
    return {
        "address": asset.lower(),
        "topics": [TRANSFER_TOPIC, *words],
        "data": hex(amount),
        "logIndex": hex(index),
        "transactionHash": "0x" + "ab" * 32,
        "blockNumber": "0x7",
    }


def test_a_transfer_to_the_payee_is_a_permit2_payment_only_of_its_senders_next_permit_of_the_token(
    chain: DevChain,
) -> None:
    owner, other, stranger = (Account.create().address for _ in range(3))
    token = chain.plain_asset
    permits = [
        SettledPermit(owner, 1, token),
        SettledPermit(owner, 2, token),
        SettledPermit(other, 3, chain.asset),  # a permit of another token moves none of this one
    ]
    logs = [
        _transfer(token, stranger, DEFAULT_PAY_TO, 11, 5),  # no permit of its sender: a plain transfer
        _transfer(token, owner, PAY_TO, 5, 0),  # the owner's first permit, to someone else
        _transfer(chain.asset, owner, DEFAULT_PAY_TO, 13, 1),  # another token's transfer
        _transfer(token, owner, DEFAULT_PAY_TO, 7, 2),  # the owner's second permit: the payment
        _transfer(token, other, DEFAULT_PAY_TO, 9, 3),
        _transfer(token, owner, DEFAULT_PAY_TO, 17, 4),  # the owner's permits are spent
    ]

    payments = pair_permit2_payments(logs, permits, token, {DEFAULT_PAY_TO})

    assert [(p.payer, p.nonce, p.pay_to, p.amount, p.block_number) for p in payments] == [
        (owner, permit2_nonce_key(2), DEFAULT_PAY_TO, 7, 7)
    ]
    assert pair_permit2_payments(logs, [], token, {DEFAULT_PAY_TO}) == []
