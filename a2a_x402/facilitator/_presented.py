"""A payment presented for settlement, whatever its transfer method: what its claim, its answers and the
search of the chain for its settlement need of it, and how to check it again.

An EIP-3009 authorization (`exact`) and a Permit2 witness transfer (`exact` by Permit2, or `upto`) are
settled by the same steps (`Settlement`, `Outcomes`): each is read into a `Presented`, whose `check` runs
every verification of its method again and hands back what the transaction sends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ._claims import ClaimKey
from ._nonce_state import is_permit2, nonce_used_reason
from .wire import Reason

__all__ = ["Presented", "Sendable"]


class Sendable(Protocol):
    """A verified payment's transaction: its `to`, its data, and the gas its simulation used."""

    @property
    def target(self) -> str: ...

    @property
    def calldata(self) -> str: ...

    @property
    def gas_estimate(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Presented:
    """One payment presented for settlement.

    `token` is the ERC-20 it moves and `amount` how much (an `upto` settlement's charge); `valid_before` the
    first unix time the chain refuses it at; `sender` the one relayer key that may send it (an `upto`
    witness's facilitator), None when any may. `sends_nothing`: an `upto` settlement of 0, settled without
    a transaction.
    """

    key: ClaimKey
    payer: str
    pay_to: str
    token: str
    amount: int
    valid_before: int
    payload_hash: str
    sender: str | None
    check: Callable[[], Awaitable[Sendable]]
    """Every check of the payment again, offline then on chain (`PaymentInvalidError`, `ChainError`)."""
    sends_nothing: bool = False

    @property
    def nonce_used(self) -> Reason:
        """The refusal's reason when the payment's nonce is used on chain."""
        return nonce_used_reason(self.key.asset)

    @property
    def claim_token(self) -> str | None:
        """What the claim stores as its token: the ERC-20 of a Permit2 payment (its key names Permit2)."""
        return self.token if is_permit2(self.key.asset) else None
