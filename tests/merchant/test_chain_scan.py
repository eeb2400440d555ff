"""The reconciler's chain scan (`merchant._chain_scan`) on the dev chain: EIP-3009 payments to the payTo
addresses asked for, each paired with its authorization, read the same in one range or block by block;
plain transfers and other payees are not payments to report."""

from __future__ import annotations

from collections.abc import Callable

from devchain import DevChain
from facilitator import RpcClient
from merchant._chain_scan import ChainPayment, payments_to
from payer import sign_payment
from tests.facilitator.payments import submit_directly
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.merchant import DEFAULT_PAY_TO, TWO_TENANTS


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
