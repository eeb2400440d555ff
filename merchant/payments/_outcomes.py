"""How a taken payment ended, told to whoever counts them, and the log line of each that was not settled.

Every payment the executor takes ends in exactly one outcome: `settled`; `refused` (not taken: the client
gets fresh terms, e.g. expired or underfunded); or `failed` (the task failed with `payment-failed`,
nothing charged unless the receipts say otherwise). Each refused or failed payment is one WARNING line
with the task, the tenant, the extension's error code and the facilitator's reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum

from ..tenants import DEFAULT_TENANT_SEGMENT

__all__ = ["OutcomeListener", "PaymentOutcome", "log_unpaid", "tenant_name"]

logger = logging.getLogger("merchant.payments")


class PaymentOutcome(StrEnum):
    """How a taken payment ended."""

    SETTLED = "settled"
    REFUSED = "refused"
    FAILED = "failed"


OutcomeListener = Callable[[str, PaymentOutcome], None]
"""Told `(tenant name, outcome)` once per payment taken (the default tenant as `default`)."""


def tenant_name(tenant: str) -> str:
    """The tenant as logs and metrics name it: the default tenant (`""`) is `default`, as in its URLs."""
    return tenant or DEFAULT_TENANT_SEGMENT


def log_unpaid(
    task_id: str, tenant: str, outcome: PaymentOutcome, error_code: str, reason: str | None, message: str
) -> None:
    """The WARNING line of a payment refused or failed."""
    logger.warning(
        "payment for task %s of tenant %s %s: %s (reason %s): %s",
        task_id,
        tenant_name(tenant),
        outcome.value,
        error_code,
        reason or "none",
        message,
        extra={
            "task_id": task_id,
            "tenant": tenant_name(tenant),
            "outcome": outcome.value,
            "error_code": error_code,
            "reason": reason,
        },
    )
