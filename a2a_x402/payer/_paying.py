"""Signing the terms the policy chose, by their transfer method: an EIP-3009 authorization, or a Permit2
witness transfer (`exact` by Permit2, `upto`) once the payments in flight leave it the allowance it needs
(`_allowance_leases`), with the EIP-2612 permit that grants it when it is short (`_allowance`)."""

from __future__ import annotations

import asyncio
import time
from functools import partial

from eth_account import Account

from a2a_x402.facilitator.wire import PaymentRequirements

from ._allowance import permit2_allowance, permit2_extensions
from ._allowance_leases import NO_LEASE, AllowanceLease, lease_allowance
from ._card import CardAsset
from ._chain import ChainAccess
from ._permit2 import sign_permit2_payment
from ._permit2_terms import is_permit2
from ._signing import sign_payment
from ._stages import SignedPayment

__all__ = ["sign_chosen"]


async def sign_chosen(
    private_key: str, requirements: PaymentRequirements, *, chains: ChainAccess, card_asset: CardAsset | None
) -> tuple[SignedPayment, AllowanceLease]:
    """The payment for `requirements`, signed off the event loop, and the part of the Permit2 allowance it
    counts on: the caller releases it once the payment's outcome is known.

    Raises:
        Permit2NotApprovedError: a Permit2 payment Permit2 may not move and the token cannot allow.
        ChainError: a Permit2 payment whose allowance could not be read.
    """
    if not is_permit2(requirements):
        return await asyncio.to_thread(sign_payment, private_key, requirements), NO_LEASE
    chain = chains.chain(requirements.network)
    owner = Account.from_key(private_key).address
    token = requirements.asset
    read = partial(permit2_allowance, chain, owner, token)
    lease = await lease_allowance(owner, requirements.network, token, requirements.amount, read)
    try:
        # The EIP-2612 permit lasts as long as the transfer it serves.
        deadline = int(time.time()) + requirements.max_timeout_seconds
        extensions = None
        if lease.sponsored:
            extensions = await permit2_extensions(
                chain,
                private_key,
                requirements,
                card_asset=card_asset,
                deadline=deadline,
                allowance=lease.allowance,
            )
        payload = await asyncio.to_thread(
            sign_permit2_payment, private_key, requirements, deadline=deadline, extensions=extensions
        )
    except BaseException:
        lease.release()
        raise
    return payload, lease
