"""The answers that are not read back from a claim (a verification's, a settle's failure), and the deadline
every chain read keeps to."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

from ._claims import Claim
from ._errors import ChainError, ChainUnavailableError, PaymentInvalidError
from ._found import ThirdPartySettlement
from .wire import Reason, SettleResponse, VerifyResponse

__all__ = ["CHAIN_DOWN", "SEND_UNDECIDED", "Answers", "read_within", "remaining", "verify_answer"]

logger = logging.getLogger(__name__)

CHAIN_DOWN = "the chain could not be reached; try again"

BROADCAST_PENDING = (
    "the settlement is broadcast but not yet confirmed; ask again with the same idempotency key"
)

SEND_UNDECIDED = (
    "the settlement's send failed and the chain could not be read to tell whether it went out after all; "
    "ask again with the same idempotency key"
)

NOT_SHOWN_LATER = (
    "the authorization was already used on chain by a transaction not shown to be mined after the payment "
    "was presented here"
)

_T = TypeVar("_T")


def remaining(deadline: float) -> float:
    """Seconds left until `deadline` (a `time.monotonic()` moment), never negative."""
    return max(deadline - time.monotonic(), 0.0)


async def read_within(read: Awaitable[_T], deadline: float | None) -> _T:
    """`read`, cut short at the deadline: only for chain reads, so nothing is left half-done (a send
    or a claim write is never cut, since what it did must be recorded). No deadline: no caller is
    waiting (a reconcile pass), so only the RPC timeout bounds it.

    Raises:
        ChainUnavailableError: the node did not answer within the budget.
    """
    if deadline is None:
        return await read
    try:
        # A timeout scope, not `wait_for`: the read runs in the caller's task instead of a new one.
        async with asyncio.timeout(remaining(deadline)):
            return await read
    except TimeoutError as exc:
        raise ChainUnavailableError("the chain did not answer within the settle's budget") from exc


async def verify_answer(checks: Awaitable[object], payer: str) -> VerifyResponse:
    """The `/verify` answer of `checks` (a payment's verification) for `payer`: valid once they pass, else
    the refusal they raised, or `unexpected_verify_error` when the chain could not be read."""
    try:
        await checks
    except PaymentInvalidError as exc:
        return VerifyResponse(
            is_valid=False, invalid_reason=exc.reason, invalid_message=exc.message, payer=payer
        )
    except ChainError as exc:
        logger.warning("verify could not reach the chain: %s", exc)
        return VerifyResponse(
            is_valid=False,
            invalid_reason=Reason.UNEXPECTED_VERIFY_ERROR,
            invalid_message=CHAIN_DOWN,
            payer=payer,
        )
    return VerifyResponse(is_valid=True, payer=payer)


class Answers:
    """Builds the failure, pending and duplicate `SettleResponse`s of one network."""

    def __init__(self, network: str):
        self.network = network

    def failure(self, reason: str, message: str, payer: str, *, transaction: str = "") -> SettleResponse:
        """`success: false` with `reason` and `message`."""
        return SettleResponse(
            success=False,
            error_reason=reason,
            error_message=message,
            payer=payer,
            transaction=transaction,
            network=self.network,
        )

    def pending(
        self, claim: Claim, tx_hash: str | None = None, *, message: str = BROADCAST_PENDING
    ) -> SettleResponse:
        """The claim's settlement is broadcast (as `tx_hash`, or the claim's) but not yet final; or, with
        `SEND_UNDECIDED`, not known to be broadcast or not."""
        return self.failure(
            Reason.SETTLEMENT_PENDING, message, claim.payer, transaction=tx_hash or claim.tx_hash or ""
        )

    def duplicate(self, claim: Claim) -> SettleResponse:
        """The authorization was already presented: the refusal names the original settlement."""
        response = self.failure(
            Reason.DUPLICATE_SETTLEMENT,
            "this authorization was already presented for settlement",
            claim.payer,
        )
        original = {"state": claim.state.value, "transaction": claim.tx_hash or ""}
        return response.model_copy(update={"extensions": {"originalSettlement": original}})

    def used_elsewhere(
        self,
        payer: str,
        settled: ThirdPartySettlement,
        *,
        reason: Reason = Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED,
        message: str = NOT_SHOWN_LATER,
    ) -> SettleResponse:
        """The refusal of an authorization that a transaction not vouched to be ours to count already used;
        `reason` is its transfer method's word for a used nonce, `message` says why it does not count."""
        refused = self.failure(reason, message, payer)
        found = {"transaction": settled.tx_hash, "blockNumber": settled.block_number}
        return refused.model_copy(update={"extensions": {"settledElsewhere": found}})
