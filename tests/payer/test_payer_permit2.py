"""`Payer` against the reference merchant asking for a token without EIP-3009 (`exact` by Permit2): refused
before signing, and the task declined, until the payer approved Permit2 once; then paid and settled. The
EIP-2612 token is paid with no approval and no gas (the permit rides in the payment), by concurrent tasks
of one key too (their permits signed in turn, each with its own nonce)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from a2a.types import TaskState
from eth_account import Account

from a2a_x402.devchain import PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION, DevChain
from a2a_x402.payer import (
    Binding,
    ChainError,
    Payer,
    PaymentPolicy,
    PaymentStage,
    Permit2NotApprovedError,
    approve_permit2,
)
from tests.fixtures.deadlines import HANG_S

from .conftest import PAY_TO, PRICE, TEXT
from .test_payer import task_state

pytestmark = pytest.mark.timeout(120)


def _holder(chain: DevChain, asset: str, *, eth: bool = False) -> str:
    key = str(Account.create().key.to_0x_hex())
    address = Account.from_key(key).address
    chain.mint(address, 10 * PRICE, asset=asset)
    if eth:
        chain.rpc.call("anvil_setBalance", [address, hex(10**17)])
    return key


@pytest.mark.parametrize("binding", list(Binding))
async def test_a_permit2_merchant_is_paid_once_the_payer_approved_permit2(
    binding: Binding, merchant: Callable[..., str], chain: DevChain
) -> None:
    url = merchant(asset=chain.plain_asset)
    key = _holder(chain, chain.plain_asset, eth=True)
    payer_address = Account.from_key(key).address
    policy = PaymentPolicy(max_amount_atomic=PRICE)

    async with await Payer.connect(url, key, binding=binding, policy=policy, rpc_urls=chain.rpc_url) as payer:
        with pytest.raises(Permit2NotApprovedError, match="approve Permit2 once") as refused:
            await payer.pay(TEXT)
        approval = await approve_permit2(chain.rpc_url, key, chain.plain_asset)
        result = await payer.pay(TEXT)

    assert (refused.value.signed, refused.value.task_id is not None) == (False, True)
    assert await task_state(url, str(refused.value.task_id)) == "TASK_STATE_CANCELED"  # declined by the payer
    assert approval.transaction is not None
    assert result.state == TaskState.TASK_STATE_COMPLETED
    assert result.paid is not None
    assert (result.paid.extra or {}).get("assetTransferMethod") == "permit2"
    assert (result.settled, result.paid.pay_to) == (PRICE, PAY_TO)
    assert chain.rpc.call("eth_getTransactionReceipt", [result.transaction])["status"] == "0x1"
    assert chain.balance_of(PAY_TO, asset=chain.plain_asset) == PRICE
    assert chain.balance_of(payer_address, asset=chain.plain_asset) == 9 * PRICE


async def test_the_eip2612_token_is_paid_through_the_merchant_without_approval_or_gas(
    merchant: Callable[..., str], chain: DevChain
) -> None:
    url = merchant(asset=chain.permit_asset, asset_name=PERMIT_ASSET_NAME, asset_version=PERMIT_ASSET_VERSION)
    key = _holder(chain, chain.permit_asset)
    payer_address = Account.from_key(key).address

    async with await Payer.connect(url, key, rpc_urls={chain.network: chain.rpc_url}) as payer:
        result = await payer.pay(TEXT)

    assert result.settled == PRICE and result.transaction is not None
    assert chain.balance_of(payer_address, asset=chain.permit_asset) == 9 * PRICE
    assert int(chain.rpc.call("eth_getTransactionCount", [payer_address, "latest"]), 16) == 0


async def test_concurrent_tasks_of_one_key_all_pay_the_eip2612_token_with_its_permits_in_turn(
    merchant: Callable[..., str], chain: DevChain
) -> None:
    url = merchant(asset=chain.permit_asset, asset_name=PERMIT_ASSET_NAME, asset_version=PERMIT_ASSET_VERSION)
    key = _holder(chain, chain.permit_asset)
    payer_address = Account.from_key(key).address
    permits: list[str] = []

    def note_permit(stage: PaymentStage) -> None:
        if stage.payload is not None and stage.payload.extensions:
            permits.append(stage.payload.extensions["eip2612GasSponsoring"]["info"]["nonce"])

    # Two tasks of one payer and one of another payer with the same key, all at once.
    rpc = {chain.network: chain.rpc_url}
    async with (
        await Payer.connect(url, key, rpc_urls=rpc) as payer,
        await Payer.connect(url, key, rpc_urls=rpc) as twin,
    ):
        results = await asyncio.wait_for(
            asyncio.gather(*(p.pay(TEXT, on_stage=note_permit) for p in (payer, payer, twin))), HANG_S
        )

    assert [(r.state, r.settled) for r in results] == [(TaskState.TASK_STATE_COMPLETED, PRICE)] * 3
    assert len({r.transaction for r in results}) == 3
    assert sorted(permits) == ["0", "1", "2"]  # each its own nonce, signed once the one before settled
    assert chain.balance_of(payer_address, asset=chain.permit_asset) == 7 * PRICE
    assert int(chain.rpc.call("eth_getTransactionCount", [payer_address, "latest"]), 16) == 0


async def test_without_a_node_the_permit2_terms_are_declined_and_nothing_signed(
    merchant: Callable[..., str], chain: DevChain
) -> None:
    url = merchant(asset=chain.plain_asset)

    async with await Payer.connect(url, _holder(chain, chain.plain_asset)) as payer:
        with pytest.raises(ChainError, match=f"no RPC URL for {chain.network}") as refused:
            await payer.pay(TEXT)

    assert (refused.value.code, refused.value.signed) == ("chain_unavailable", False)
    assert await task_state(url, str(refused.value.task_id)) == "TASK_STATE_CANCELED"  # declined by the payer
