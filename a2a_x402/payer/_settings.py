"""What a payer may be told to do: the bounds of a payment run and the hook before fresh terms are paid."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from a2a_x402.extension import PaymentRequiredData

__all__ = ["FreshTermsHook", "PayerSettings"]

FreshTermsHook = Callable[[PaymentRequiredData], Awaitable[None]]
"""Awaited before a new authorization is signed for fresh terms; may top up, wait, or raise to stop."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PayerSettings:
    """Timeouts and bounds of a payment run.

    Attributes:
        request_timeout_s: each A2A call's timeout; a paid SendMessage waits for the settlement.
        submit_attempts: how often one signed payment is presented when its answer is lost.
        max_payments: how many authorizations one run may sign (the first plus fresh terms).
        retry_backoff_s: the pause before the n-th re-presentation is n times this.
        poll_interval_s: the pause between GetTask calls while the task is working.
        pending_timeout_s: how long to wait for a working task (a pending settlement) to resolve.
    """

    request_timeout_s: float = 60.0
    submit_attempts: int = 3
    max_payments: int = 3
    retry_backoff_s: float = 0.2
    poll_interval_s: float = 0.5
    pending_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if self.submit_attempts < 1 or self.max_payments < 1:
            raise ValueError("submit_attempts and max_payments must be at least 1")
        if min(self.request_timeout_s, self.poll_interval_s, self.pending_timeout_s) <= 0:
            raise ValueError("timeouts and intervals must be positive")
