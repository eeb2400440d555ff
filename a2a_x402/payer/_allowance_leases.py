"""The Permit2 allowance the payments in flight of one payer count on, so that concurrent payments of one
token all settle and none is signed against an allowance another will use up.

Permit2 moves a token within the allowance its owner gave it, and every transfer uses its amount of it up
(but a maximal approval). Two payments signed at once against one allowance both see all of it. Worse, an
EIP-2612 permit of the `eip2612GasSponsoring` extension is signed with the owner's next `nonces(owner)` and
sets the allowance to exactly its own payment's amount: a second permit signed before the first is used
carries the same nonce and is void once the first settles (its payment then fails), one signed with the
nonce after is refused until the first is used (the token takes nonces in order, and the merchant verifies
before it settles), and either would overwrite what a payment without a permit counts on.

So, per (owner, network, token) in this process (whichever `Payer` pays): a payment whose amount fits in
the allowance read less what the payments in flight count on goes ahead and counts its amount; otherwise it
waits until no payment of the token is in flight, reads again, and then fits, or goes ahead alone to sign a
permit (`sponsored`): no other payment of the token starts until that one's run ended, since its
settlement uses up the nonce and the allowance it grants. A lease lasts until its payment's run knows what
became of it (completed, failed, fresh terms asked, or given up); a run given up while the merchant might
still settle it (`PaymentPendingError`) can leave the next permit void, its payment then failing with
nothing taken. Processes do not see each other's leases: pay a token from one process at a time.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["NO_LEASE", "AllowanceLease", "lease_allowance"]


@dataclass(slots=True)
class _Token:
    """What the payments in flight of one owner's token count on."""

    counted: int = 0
    plain: int = 0
    sponsored: bool = False
    deciding: asyncio.Lock = field(default_factory=asyncio.Lock)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def signal(self) -> None:
        """Wake every payment waiting for this token's payments in flight to change."""
        self.changed.set()
        self.changed = asyncio.Event()


class AllowanceLease:
    """One payment's part of the allowance. `sponsored`: the allowance (`allowance`, as read) is short, no
    other payment of the token is in flight, and this one may sign an EIP-2612 permit alone."""

    def __init__(self, token: _Token | None, amount: int, *, sponsored: bool, allowance: int) -> None:
        self._token = token
        self._amount = amount
        self.sponsored = sponsored
        self.allowance = allowance

    def release(self) -> None:
        """Give the part back (once): the payment it served has an outcome, or was never signed."""
        token, self._token = self._token, None
        if token is None:
            return
        if self.sponsored:
            token.sponsored = False
        else:
            token.counted -= self._amount
            token.plain -= 1
        token.signal()


NO_LEASE = AllowanceLease(None, 0, sponsored=False, allowance=0)
"""What a payment not made by Permit2 holds: nothing."""

# Per event loop: asyncio's locks and events belong to the loop they are first used in.
_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str, str], _Token]] = (
    weakref.WeakKeyDictionary()
)


async def lease_allowance(
    owner: str, network: str, token: str, amount: int, read_allowance: Callable[[], Awaitable[int]]
) -> AllowanceLease:
    """A lease of `amount` of `owner`'s allowance of `token` to Permit2, or the sponsored lease, once the
    payments in flight allow one; `read_allowance` reads the allowance from the chain.

    Raises:
        whatever `read_allowance` raises (nothing leased).
    """
    tokens = _loops.setdefault(asyncio.get_running_loop(), {})
    state = tokens.setdefault((owner.lower(), network, token.lower()), _Token())
    while True:
        async with state.deciding:
            if not state.sponsored:
                allowance = await read_allowance()
                if allowance - state.counted >= amount:
                    state.counted += amount
                    state.plain += 1
                    return AllowanceLease(state, amount, sponsored=False, allowance=allowance)
                if state.plain == 0:
                    state.sponsored = True
                    return AllowanceLease(state, 0, sponsored=True, allowance=allowance)
            changed = state.changed
        await changed.wait()
