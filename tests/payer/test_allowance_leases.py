"""Payments in flight share the payer's Permit2 allowance (`_allowance_leases`), on the dev chain with our
in-process facilitator: a second EIP-2612 permit waits until the first payment's outcome and is then signed
with the token's next nonce, both settling; payments within the allowance go ahead at once, one that does
not fit beside them waits and is then refused before signing (nothing signed that would fail on chain)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from eth_account import Account

from a2a_x402.devchain import PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION, DevChain
from a2a_x402.facilitator import Facilitator
from a2a_x402.facilitator.wire import PaymentRequirements
from a2a_x402.payer import Permit2NotApprovedError
from a2a_x402.payer._allowance_leases import AllowanceLease
from a2a_x402.payer._chain import ChainAccess
from a2a_x402.payer._paying import sign_chosen
from a2a_x402.payer._stages import SignedPayment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO, facilitator_settings_on

AMOUNT = 1_500_000
# How long a payment that must wait is given to (wrongly) go ahead: it waits on an event, not on time.
_NOT_YET_S = 1.0


@pytest.fixture
async def facilitator(chain: DevChain, sqlite_url: str) -> AsyncIterator[Facilitator]:
    service = await Facilitator.open(facilitator_settings_on(chain, sqlite_url))
    try:
        yield service
    finally:
        await service.aclose()


@pytest.fixture
async def chains(chain: DevChain) -> AsyncIterator[ChainAccess]:
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        yield ChainAccess(http, chain.rpc_url, timeout_s=HANG_S)


def _asked(chain: DevChain, asset: str) -> PaymentRequirements:
    extra = {"assetTransferMethod": "permit2"}
    if asset == chain.permit_asset:
        extra |= {"name": PERMIT_ASSET_NAME, "version": PERMIT_ASSET_VERSION}
    return PaymentRequirements(
        scheme="exact",
        network=chain.network,
        asset=asset,
        amount=AMOUNT,
        pay_to=PAY_TO,
        max_timeout_seconds=120,
        extra=extra,
    )


def _funded(chain: DevChain, asset: str) -> str:
    key = str(Account.create().key.to_0x_hex())
    chain.mint(Account.from_key(key).address, 5 * AMOUNT, asset=asset)
    return key


async def _settle(facilitator: Facilitator, payment: SignedPayment, asked: PaymentRequirements) -> None:
    verified = await facilitator.verify(payment, asked)
    assert (verified.is_valid, verified.invalid_reason) == (True, None)
    settled = await facilitator.settle(payment, asked)
    assert (settled.success, settled.error_reason) == (True, None)


async def _not_done(pending: asyncio.Task[tuple[SignedPayment, AllowanceLease]]) -> bool:
    done, _ = await asyncio.wait({pending}, timeout=_NOT_YET_S)
    return not done


async def test_a_second_eip2612_permit_waits_for_the_first_payment_and_takes_the_next_nonce(
    chain: DevChain, facilitator: Facilitator, chains: ChainAccess
) -> None:
    key = _funded(chain, chain.permit_asset)
    payer = Account.from_key(key).address
    asked = _asked(chain, chain.permit_asset)

    first, first_lease = await sign_chosen(key, asked, chains=chains, card_asset=None)
    second_signing = asyncio.create_task(sign_chosen(key, asked, chains=chains, card_asset=None))
    waited = await _not_done(second_signing)
    await _settle(facilitator, first, asked)
    first_lease.release()
    second, second_lease = await asyncio.wait_for(second_signing, HANG_S)
    await _settle(facilitator, second, asked)
    second_lease.release()

    assert waited  # no second permit while the first was in flight
    nonces = [(p.extensions or {})["eip2612GasSponsoring"]["info"]["nonce"] for p in (first, second)]
    assert nonces == ["0", "1"]
    assert chain.balance_of(payer, asset=chain.permit_asset) == 3 * AMOUNT
    assert int(chain.rpc.call("eth_getTransactionCount", [payer, "latest"]), 16) == 0


async def test_a_failed_payment_gives_its_permit_nonce_back(
    chain: DevChain, facilitator: Facilitator, chains: ChainAccess
) -> None:
    key = _funded(chain, chain.permit_asset)
    asked = _asked(chain, chain.permit_asset)

    _unsettled, lease = await sign_chosen(key, asked, chains=chains, card_asset=None)
    lease.release()  # its run ended without a settlement (a task failed, fresh terms)
    again, again_lease = await asyncio.wait_for(
        sign_chosen(key, asked, chains=chains, card_asset=None), HANG_S
    )
    await _settle(facilitator, again, asked)
    again_lease.release()

    assert (again.extensions or {})["eip2612GasSponsoring"]["info"]["nonce"] == "0"


async def test_payments_within_the_allowance_go_ahead_and_one_beyond_it_is_refused_before_signing(
    chain: DevChain, facilitator: Facilitator, chains: ChainAccess
) -> None:
    key = _funded(chain, chain.plain_asset)
    chain.approve_permit2(key, chain.plain_asset, 2 * AMOUNT + AMOUNT // 2)
    asked = _asked(chain, chain.plain_asset)

    both = await asyncio.wait_for(
        asyncio.gather(*(sign_chosen(key, asked, chains=chains, card_asset=None) for _ in range(2))), HANG_S
    )
    third = asyncio.create_task(sign_chosen(key, asked, chains=chains, card_asset=None))
    waited = await _not_done(third)
    for payment, lease in both:
        await _settle(facilitator, payment, asked)
        lease.release()
    with pytest.raises(Permit2NotApprovedError, match=f"{AMOUNT // 2} of {AMOUNT} atomic units"):
        await asyncio.wait_for(third, HANG_S)

    assert waited  # the allowance left beside the two in flight was short: it waited for them
    assert all(payment.extensions is None and not lease.sponsored for payment, lease in both)
