"""`prove_settlement`: the merchant books only what the chain shows a settlement paid.

Whatever facilitator named the transaction, the receipt read through the merchant's own node must show the
payer's authorization used and the offered amount moved to the offered payTo; any other transaction (a
stranger's, another payer's, another amount, one that is not there, a reverted one, no hash at all) is
refused with what it shows, and nothing is booked from it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import RpcClient
from a2a_x402.merchant.payments._chain_proof import NotProvenError, prove_settlement
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import submit_directly
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.merchant import DEFAULT_PAY_TO


def _last_tx(chain: DevChain) -> str:
    block = chain.rpc.call("eth_getBlockByNumber", ["latest", False])
    return str(block["transactions"][-1])


@pytest.fixture
async def rpc(chain: DevChain) -> AsyncIterator[RpcClient]:
    client = RpcClient(chain.rpc_url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_a_settlement_that_paid_the_terms_is_proven_from_its_receipt(
    chain: DevChain, rpc: RpcClient, new_payer: Callable[..., str]
) -> None:
    requirements = make_requirements(chain, pay_to=DEFAULT_PAY_TO, amount=1_000)
    payload = sign_payment(new_payer(), requirements)
    submit_directly(chain, payload)  # any sender will do: the logs say who paid whom
    tx_hash = _last_tx(chain)

    paid = await prove_settlement(rpc, tx_hash, payload, requirements)

    receipt = chain.rpc.call("eth_getTransactionReceipt", [tx_hash])
    authorization = payload.payload.authorization
    assert (paid.payer, paid.nonce, paid.pay_to, paid.amount) == (
        authorization.from_address,
        authorization.nonce.lower(),
        DEFAULT_PAY_TO,
        1_000,
    )
    assert (paid.tx_hash, paid.block_number) == (tx_hash.lower(), int(receipt["blockNumber"], 16))
    # The hash as the facilitator may spell it (upper-case hex) names the same transaction.
    assert await prove_settlement(rpc, "0x" + tx_hash[2:].upper(), payload, requirements) == paid


async def test_a_transaction_that_paid_something_else_proves_nothing(
    chain: DevChain, rpc: RpcClient, new_payer: Callable[..., str]
) -> None:
    requirements = make_requirements(chain, pay_to=DEFAULT_PAY_TO, amount=1_000)
    key = new_payer()
    payload = sign_payment(key, requirements)
    submit_directly(chain, payload)
    tx_hash = _last_tx(chain)
    # The same payer's other authorization, another payer's, another price, another payee.
    other_nonce = sign_payment(key, requirements)
    stranger = sign_payment(new_payer(), requirements)
    dearer = make_requirements(chain, pay_to=DEFAULT_PAY_TO, amount=2_000)

    for claimed, terms in ((other_nonce, requirements), (stranger, requirements)):
        with pytest.raises(NotProvenError, match="shows no transfer"):
            await prove_settlement(rpc, tx_hash, claimed, terms)
    with pytest.raises(NotProvenError, match="paid 1000, not the offered 2000"):
        await prove_settlement(rpc, tx_hash, payload, dearer)
    elsewhere = make_requirements(chain, amount=1_000)
    with pytest.raises(NotProvenError, match="shows no transfer"):
        await prove_settlement(rpc, tx_hash, payload, elsewhere)


async def test_a_transaction_the_node_lacks_a_reverted_one_or_no_hash_proves_nothing(
    chain: DevChain, rpc: RpcClient, new_payer: Callable[..., str]
) -> None:
    requirements = make_requirements(chain, pay_to=DEFAULT_PAY_TO, amount=1_000)
    payload = sign_payment(new_payer(), requirements)
    submit_directly(chain, payload)
    # The same transfer again, past the gas estimate that would refuse it: mined, and reverted.
    again = chain.rpc.call("eth_getTransactionByHash", [_last_tx(chain)])
    reverted = chain.rpc.send_transaction(
        chain.deployer_key, to=chain.asset, data=bytes.fromhex(again["input"][2:]), gas=300_000
    )
    assert int(chain.rpc.wait_for_receipt(reverted, timeout_s=HANG_S)["status"], 16) == 0

    with pytest.raises(NotProvenError, match="did not succeed"):
        await prove_settlement(rpc, reverted, payload, requirements)
    with pytest.raises(NotProvenError, match="not on the merchant's node"):
        await prove_settlement(rpc, "0x" + "ab" * 32, payload, requirements, unseen_wait_s=0.3)
    for not_a_hash in ("", "0x12", "0x" + "zz" * 32, "0x" + "ab" * 32 + "\n", "x" * 10_000):
        with pytest.raises(NotProvenError, match="is not a transaction hash"):
            await prove_settlement(rpc, not_a_hash, payload, requirements)
