"""Merchants of the payment kinds beside `exact` by EIP-3009, for the kit's Permit2 and metered checks.

* `MeteredTextStats`: the text-stats skill metered by what it reads (`CHARACTER_PRICE` a character,
  `SENTENCE_PRICE` a sentence); a request holding `FAILING_REQUEST` reports its usage, then fails the work.
  `used=False`: it reports nothing used, so the task settles 0.
* `metered_tenants`: a tenants file whose `acme` meters text-stats up to `MAXIMUM` (the default tenant
  charges its fixed price, by EIP-3009).

Deliberately wrong merchants, each caught by the checks that test its fault:

* `ClaimsUnsentPermit2`: a payment layer whose facilitator answers every Permit2 settlement with a success
  naming a transaction it never sends: the task completes, nothing moved.
* `SettlesTheMaximum`: a facilitator that settles an `upto` payment for the whole maximum, whatever the
  merchant asked it to settle: the payer is charged more than the usage (the merchant, seeing its receipt
  disagree with its usage, never completes the task).
* `ChargesBeforeTheWork`: a facilitator that settles an `upto` payment for its maximum as soon as it is
  verified, before the work runs: work that then fails was charged all the same (the merchant's own answer,
  payment-failed with nothing delivered, looks right; the chain does not).
* `inflates_usage`: answers on the A2A 1.0 HTTP bindings whose `usage` items claim more units than their
  amounts are the price of (§6.4 rule 1 broken).
* `misreports_charge`: answers on A2A 1.0 whose completion reports another charge than the one settled, with
  a `usage` that agrees with it: 1 atomic unit on JSON-RPC (less than moved), one more than the maximum on
  HTTP+JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2a.helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part
from starlette.types import ASGIApp, Scope

from a2a_x402.facilitator import Facilitator
from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentRequirements,
    Permit2PaymentPayload,
    SettleResponse,
    UptoPaymentPayload,
    VerifyResponse,
)
from a2a_x402.merchant import usage_meter
from a2a_x402.merchant.demo_skill import TextStatsExecutor, text_stats
from tests.fixtures.conformance import ACME_PAY_TO, ACME_PRICE
from tests.fixtures.merchant import DEFAULT_PAY_TO, DEFAULT_PRICE

from .broken import rewrite_json

__all__ = [
    "CHARACTER_PRICE",
    "FAILING_REQUEST",
    "MAXIMUM",
    "SENTENCE_PRICE",
    "ChargesBeforeTheWork",
    "ClaimsUnsentPermit2",
    "MeteredTextStats",
    "SettlesTheMaximum",
    "inflates_usage",
    "metered_tenants",
    "misreports_charge",
]

MAXIMUM = 500_000
CHARACTER_PRICE = 25
SENTENCE_PRICE = 5_000
FAILING_REQUEST = "Please fail this work."
_NEVER_SENT = "0x" + "cd" * 32


class MeteredTextStats(AgentExecutor):
    """The text-stats skill, metered by its characters and sentences (see the module docstring)."""

    def __init__(self, *, used: bool = True) -> None:
        self._used = used
        self._skill = TextStatsExecutor()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Report the usage, then answer (or fail, for `FAILING_REQUEST`)."""
        text = get_message_text(context.message) if context.message is not None else ""
        stats = text_stats(text)
        meter = usage_meter(context)
        for name, quantity, price in (
            ("characters", stats["characters"], CHARACTER_PRICE),
            ("sentences", stats["sentences"], SENTENCE_PRICE),
        ):
            meter.add(
                name, quantity=quantity if self._used and isinstance(quantity, int) else 0, unit_price=price
            )
        if FAILING_REQUEST in text and context.current_task is not None:
            updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
            await updater.failed(updater.new_agent_message([Part(text="the work failed, as asked")]))
            return
        await self._skill.execute(context, event_queue)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the skill."""
        await self._skill.cancel(context, event_queue)


def metered_tenants(path: Path) -> Path:
    """A tenants file: the default tenant at its fixed price, `acme` metering text-stats up to `MAXIMUM`."""
    path.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = "{DEFAULT_PRICE}"\n\n'
        f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = "{ACME_PRICE}"\n'
        f"[tenants.acme.metered_skills]\ntext-stats = {MAXIMUM}\n"
    )
    return path


class ClaimsUnsentPermit2(Facilitator):
    """Answers Permit2 settlements with a success naming a transaction never sent (EIP-3009 ones settle)."""

    async def settle(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        **options: Any,
    ) -> SettleResponse:
        """A success without a settlement, for a Permit2 payment."""
        if isinstance(payload, PaymentPayload):
            return await Facilitator.settle(self, payload, requirements, **options)
        return SettleResponse(
            success=True,
            transaction=_NEVER_SENT,
            network=requirements.network,
            payer=payload.payload.permit2_authorization.from_address,
            amount=requirements.amount,
        )


class SettlesTheMaximum(Facilitator):
    """Settles an `upto` payment for the maximum the payer signed for, not the amount asked."""

    async def settle(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        **options: Any,
    ) -> SettleResponse:
        """The real settlement, of the whole maximum."""
        if isinstance(payload, UptoPaymentPayload):
            maximum = payload.payload.permit2_authorization.permitted.amount
            requirements = requirements.model_copy(update={"amount": maximum})
        return await Facilitator.settle(self, payload, requirements, **options)


class ChargesBeforeTheWork(Facilitator):
    """Settles an `upto` payment for its maximum when verifying it, before the work it pays for has run."""

    async def verify(
        self, payload: PaymentPayload | Permit2PaymentPayload, requirements: PaymentRequirements
    ) -> VerifyResponse:
        """The real verification; a valid `upto` payment is then settled for its maximum at once."""
        verified = await Facilitator.verify(self, payload, requirements)
        if verified.is_valid and isinstance(payload, UptoPaymentPayload):
            await Facilitator.settle(self, payload, requirements)
        return verified


def _inflate(value: Any) -> Any:
    if isinstance(value, dict):
        usage = value.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("items"), list):
            items = [
                {**item, "quantity": str(int(item["quantity"]) + 1)} if isinstance(item, dict) else item
                for item in usage["items"]
            ]
            return {**value, "usage": {**usage, "items": items}}
        return {key: _inflate(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_inflate(item) for item in value]
    return value


def inflates_usage(app: ASGIApp) -> ASGIApp:
    """JSON answers to A2A 1.0 requests whose usage items claim one unit more than their amounts price."""
    return rewrite_json(app, _inflate)


def _charged(amount: int) -> Any:
    """A transform making a completion's newest receipt and its `usage` report `amount` charged."""

    def report(value: Any) -> Any:
        if isinstance(value, dict):
            usage, receipts = value.get("usage"), value.get("receipts")
            if isinstance(usage, dict) and isinstance(receipts, list) and receipts:
                item = {"name": "calls", "quantity": str(amount), "unitPrice": "1", "amount": str(amount)}
                return {
                    **value,
                    "receipts": [*receipts[:-1], {**receipts[-1], "amount": str(amount)}],
                    "usage": {**usage, "settled": str(amount), "items": [item]},
                }
            return {key: report(item) for key, item in value.items()}
        if isinstance(value, list):
            return [report(item) for item in value]
        return value

    return report


def _a2a_1_0_at(path: str) -> Any:
    def applies(scope: Scope) -> bool:
        versions = [v for n, v in scope.get("headers", []) if n.lower() == b"a2a-version"]
        return str(scope.get("path", "")).startswith(path) and versions[:1] == [b"1.0"]

    return applies


def misreports_charge(app: ASGIApp) -> ASGIApp:
    """Completions on A2A 1.0 report a charge of 1 (JSON-RPC) or of `MAXIMUM + 1` (HTTP+JSON)."""
    understated = rewrite_json(app, _charged(1), _a2a_1_0_at("/a2a/jsonrpc"))
    return rewrite_json(understated, _charged(MAXIMUM + 1), _a2a_1_0_at("/a2a/rest"))
