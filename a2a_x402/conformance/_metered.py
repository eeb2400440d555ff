"""Metered payments (spec §6.4, §7.7, §8.11): an ``upto`` entry paid for its maximum, then what was settled.

The checks apply where the terms of the card's request offer an ``upto`` entry; elsewhere they are skipped,
saying so. The kit signs a Permit2 witness transfer for the maximum and reads, from outside, what §7.7 says
can be checked so: the receipt's amount and ``usage.settled`` are the same, at most the offered maximum, and
``usage`` follows the arithmetic of §6.4; the settlement transaction moved exactly that amount from the
payer to payTo, and a settlement of 0 sent no transaction and left the Permit2 nonce unspent. Failed work
settles nothing; the specification gives a client no way to make work fail, so that check runs only with a
request the operator knows fails (``KitSettings.failing_request``).
"""

from __future__ import annotations

from typing import Any

from ._context import NotApplicable, Probe, Unspent, fail
from ._permit2_flow import PERMIT2_CHECKS, expect_permit2_settled, pay_permit2, permit2_task
from ._reading import artifacts_of, state_of
from ._reply import Reply
from ._signer import Signed
from ._steps import extension_object, new_offer, offer_from
from ._wire import Wire

__all__ = ["FAILED_WORK_CHECKS", "METERED_CHECKS", "failed_work", "metered_task", "payment_kinds"]

JSON = Any
METERED_CHECKS = (
    "metered.completes",
    "metered.within-maximum",
    "metered.usage-consistent",
    "metered.settled-on-chain",
)
FAILED_WORK_CHECKS = ("metered.failed-work",)
_USAGE_MEMBERS = frozenset({"maximum", "settled", "items"})
_ITEM_MEMBERS = frozenset({"name", "quantity", "unitPrice", "amount"})
_MAX_ITEMS = 100
_MAX_NAME = 128


def _number(value: JSON) -> int | None:
    """A §5.3 amount (a decimal string of a non-negative integer, no sign or leading zeros), or ``None``."""
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        return None
    return int(value) if value == "0" or not value.startswith("0") else None


def _completion(task: JSON, reply: Reply) -> tuple[JSON, JSON]:
    """The newest receipt (successful) and the ``usage`` of a completed metered task (else fails)."""
    if state_of(task) != "TASK_STATE_COMPLETED":
        raise fail(
            f"the paid metered task is {state_of(task) or 'without a state'}, not completed", reply.exchange
        )
    if not artifacts_of(task):
        raise fail("the completed task carries no artifact", reply.exchange)
    value = extension_object(task)
    if value is None or value.get("status") != "payment-completed":
        raise fail("the completed status message has no payment-completed object", reply.exchange)
    receipts = value.get("receipts")
    receipt = receipts[-1] if isinstance(receipts, list) and receipts else None
    if not isinstance(receipt, dict) or receipt.get("success") is not True:
        raise fail("payment-completed does not end with a successful receipt", reply.exchange)
    if not isinstance(receipt.get("transaction"), str):
        raise fail("the successful receipt has no transaction member", reply.exchange)
    usage = value.get("usage")
    if not isinstance(usage, dict):
        raise fail(
            "the payment-completed of a metered task carries no usage object (§6.4 rule 4)", reply.exchange
        )
    return receipt, usage


def _usage_problem(usage: JSON, receipt: JSON, maximum: int) -> str:
    """What in ``usage`` breaks §6.4 against its receipt and the offered ``maximum`` (``""``: nothing)."""
    unknown = sorted(set(usage) - _USAGE_MEMBERS)
    if unknown:
        return f"usage has members §6.4 does not name: {unknown}"
    items = usage.get("items")
    if not isinstance(items, list) or len(items) > _MAX_ITEMS:
        return f"usage.items is not a list of at most {_MAX_ITEMS} entries"
    total = 0
    for index, item in enumerate(items):
        if not isinstance(item, dict) or set(item) != _ITEM_MEMBERS:
            return f"usage.items[{index}] does not have exactly the members {sorted(_ITEM_MEMBERS)}"
        name = item["name"]
        if not isinstance(name, str) or not 1 <= len(name) <= _MAX_NAME:
            return f"usage.items[{index}].name is not a string of 1 to {_MAX_NAME} characters"
        quantity, unit_price, amount = (_number(item[k]) for k in ("quantity", "unitPrice", "amount"))
        if quantity is None or unit_price is None or amount is None:
            return f"usage.items[{index}] has a number that is not a decimal string (§5.3)"
        if amount != quantity * unit_price:
            return (
                f"usage.items[{index}].amount is {amount}, not quantity × unitPrice = {quantity * unit_price}"
            )
        total += amount
    settled, stated_maximum = _number(usage.get("settled")), _number(usage.get("maximum"))
    if settled is None or stated_maximum is None:
        return "usage.settled or usage.maximum is not a decimal string (§5.3)"
    if stated_maximum != maximum:
        return f"usage.maximum is {stated_maximum}, not the offered maximum {maximum}"
    if settled != min(total, maximum):
        return f"usage.settled is {settled}, not min(sum of the items' amounts {total}, maximum {maximum})"
    if _number(receipt.get("amount")) != settled:
        return f"usage.settled is {settled}, but the successful receipt's amount is {receipt.get('amount')!r}"
    return ""


async def _expect_unspent(probe: Probe, signed: Signed, reply: Reply, check_id: str, why: str) -> None:
    """The payment's Permit2 nonce is unspent now, and again at the end of the run."""
    if await probe.run.chain.nonce_used(signed.nonce_at, signed.payer, signed.nonce):
        raise fail(f"the payment's Permit2 nonce is spent although {why}: money moved", reply.exchange)
    probe.run.unspent.append(Unspent(check_id, probe.target, signed.nonce_at, signed.payer, signed.nonce))


async def metered_task(probe: Probe, wire: Wire, terms: Reply | None = None) -> None:
    """An ``upto`` entry paid for its maximum (of ``terms``, the answer to a priced request the kit did not
    pay, else a new one): the completion, its receipt and usage, and the chain."""
    async with probe.check("metered.completes") as shown:
        if terms is None:
            offer = await new_offer(probe, wire, "upto")
        else:
            offer = offer_from(probe, terms, wire.interface.tenant, "upto")
        shown.append(offer.reply.exchange)
        signed, paid = await pay_permit2(probe, wire, offer)
        shown[:] = [paid.exchange]
        receipt, usage = _completion(paid.task, paid)
    if probe.failed or probe.skip_rest("metered.completes", METERED_CHECKS[1:]):
        return
    maximum, settled = offer.amount, _number(receipt.get("amount"))
    async with probe.check("metered.within-maximum"):
        if settled is None:
            raise fail("the successful receipt of a metered task carries no amount (§6.3)", paid.exchange)
        if settled > maximum:
            raise fail(f"the receipt settles {settled}, over the authorized maximum {maximum}", paid.exchange)
        stated = _number(usage.get("settled"))  # its form is metered.usage-consistent's to judge
        if stated is not None and stated > maximum:
            raise fail(f"usage.settled {stated} is over the authorized maximum {maximum}", paid.exchange)
    async with probe.check("metered.usage-consistent"):
        problem = _usage_problem(usage, receipt, maximum)
        if problem:
            raise fail(problem, paid.exchange)
    async with probe.check("metered.settled-on-chain"):
        transaction = receipt["transaction"]
        if settled is None:
            raise fail("the successful receipt of a metered task carries no amount (§6.3)", paid.exchange)
        if settled == 0:
            if transaction:
                raise fail(
                    f"a settlement of 0 names transaction {transaction}: it must send none", paid.exchange
                )
            await _expect_unspent(probe, signed, paid, "metered.settled-on-chain", "the settlement was 0")
            return
        if not transaction:
            raise fail(f"the receipt settles {settled} but names no transaction", paid.exchange)
        await expect_permit2_settled(probe, signed, transaction, settled, paid)


async def payment_kinds(probe: Probe, wire: Wire) -> None:
    """The checks of ``exact`` by Permit2, then the metered ones, on one priced request where the terms
    offer one kind only (each kind's checks stop on their own failures, not the other's)."""
    terms: Reply | None = None
    async with probe.scenario(PERMIT2_CHECKS) as permit2:
        terms = await permit2_task(permit2, wire)
    async with probe.scenario(METERED_CHECKS) as metered:
        await metered_task(metered, wire, terms)


async def failed_work(probe: Probe, wire: Wire) -> None:
    """A metered task whose work fails (the operator's failing request): nothing settled, no usage."""
    run = probe.run
    async with probe.check("metered.failed-work") as shown:
        if not run.failing_request:
            raise NotApplicable(
                "the specification gives a client no way to make work fail, and no request that does "
                "was given (--failing-request)"
            )
        offer = await new_offer(probe, wire, "upto", text=run.failing_request)
        shown.append(offer.reply.exchange)
        signed, paid = await pay_permit2(probe, wire, offer)
        shown[:] = [paid.exchange]
        task = paid.task
        value = extension_object(task) or {}
        if state_of(task) == "TASK_STATE_COMPLETED":
            raise NotApplicable("the --failing-request completed its task: its work did not fail")
        if state_of(task) != "TASK_STATE_FAILED" or value.get("status") != "payment-failed":
            raise fail(
                f"the failed work left the task {state_of(task) or 'without a state'} with "
                f"{value.get('status')!r}, not TASK_STATE_FAILED with payment-failed (T7)",
                paid.exchange,
            )
        if value.get("error") != "SETTLEMENT_FAILED":
            raise fail(
                f"payment-failed carries error {value.get('error')!r}, not SETTLEMENT_FAILED", paid.exchange
            )
        receipts = value.get("receipts")
        listed = receipts if isinstance(receipts, list) else []
        if any(isinstance(r, dict) and r.get("success") is True for r in listed):
            raise fail("the payment-failed of failed work carries a successful receipt", paid.exchange)
        if "usage" in value:
            raise fail("the payment-failed of failed work carries usage (§7.7 item 5)", paid.exchange)
        if artifacts_of(task):
            raise fail("the task whose work failed carries an artifact", paid.exchange)
        await _expect_unspent(probe, signed, paid, "metered.failed-work", "the work failed")
