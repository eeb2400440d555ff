"""The same payment presented again while it is processed (§11, T13): one charge, one receipt, one delivery.

Three messages (each with its own ``messageId``, §11.6) carry the same signed payload for the same task: two
sent together, racing, and a third sent as soon as ``GetTask`` shows the task being processed (left the
request to pay), so it arrives while the first is processed on any merchant slow enough to be seen processing,
and after the end on one that is not. Each answer is the task as it stands, or ``UnsupportedOperationError``
once the task is terminal; none may offer the terms again. The chain then shows the authorization used exactly
once, and the task ends with one successful receipt naming that transaction and the artifacts of one delivery.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._context import Probe, fail
from ._messages import extension_message
from ._reading import artifacts_of, expect_error, state_of
from ._reply import Reply
from ._signer import payload_v2
from ._steps import extension_object, new_offer, outcome_of
from ._wire import Wire

__all__ = ["CONCURRENT_CHECKS", "represented_concurrently"]

JSON = Any
CONCURRENT_CHECKS = ("payment.represented-concurrently",)
_POLL_S = 0.05


def _successful_transactions(task: JSON) -> list[str]:
    receipts = (extension_object(task) or {}).get("receipts")
    return [
        str(r.get("transaction"))
        for r in (receipts if isinstance(receipts, list) else [])
        if isinstance(r, dict) and r.get("success") is True
    ]


async def represented_concurrently(probe: Probe, wire: Wire) -> None:
    """Present one payment three times on a new task while it is processed: charged and delivered once."""
    interface, run = wire.interface, probe.run
    async with probe.check("payment.represented-concurrently") as shown:
        offer = await new_offer(probe, wire)
        shown.append(offer.reply.exchange)
        signed = run.signer.sign(
            offer.entry, tenant=interface.tenant, network=offer.network, amount=offer.amount
        )
        payload = payload_v2(offer.entry, signed)
        messages = [
            extension_message(interface, offer.task_id, "payment-submitted", payload=payload)
            for _ in range(3)
        ]
        first_answered = asyncio.Event()

        async def first() -> Reply:
            try:
                return await wire.send(messages[0])
            finally:
                first_answered.set()

        async def while_processed() -> Reply:
            deadline = asyncio.get_running_loop().time() + run.timeout_s
            while not first_answered.is_set() and asyncio.get_running_loop().time() < deadline:
                seen = await wire.get_task(offer.task_id)
                if state_of(seen.task) != "TASK_STATE_INPUT_REQUIRED":
                    break
                await asyncio.sleep(_POLL_S)
            return await wire.send(messages[2])

        replies = await asyncio.gather(first(), wire.send(messages[1]), while_processed())
        shown[:] = [reply.exchange for reply in replies]
        followed: list[Reply] = []
        for reply in replies:
            if reply.error is not None:
                problem = expect_error(reply, "UNSUPPORTED_OPERATION", interface)
                if problem:
                    raise fail(f"a payment presented again while processed was refused: {problem}", *shown)
                continue
            if (extension_object(reply.task) or {}).get("status") == "payment-required":
                raise fail(
                    "a payment presented again while processed was answered with the terms again",
                    reply.exchange,
                )
            followed.append(await outcome_of(probe, wire, reply))
        if not followed:
            raise fail("every presentation of the payment was refused", *shown)
        final = await wire.get_task(offer.task_id)
        task = final.task
        if state_of(task) != "TASK_STATE_COMPLETED" or not artifacts_of(task):
            raise fail(
                f"the task is {state_of(task) or 'stateless'}, not completed with an artifact", final.exchange
            )
        uses = await run.chain.uses_of(signed.asset, signed.payer, signed.nonce, run.start_block)
        if len(uses) != 1:
            raise fail(f"the authorization was used by {uses}: not charged exactly once", final.exchange)
        if _successful_transactions(task) != uses:
            raise fail(f"the task's successful receipts are not one for {uses[0]}", final.exchange)
        for reply in followed:
            if any(t != uses[0] for t in _successful_transactions(reply.task)):
                raise fail("an answer carries a receipt for another transaction", reply.exchange)
        ids = [a.get("artifactId") for a in artifacts_of(task)]
        if len(ids) != len(set(ids)):
            raise fail("the task carries the same artifact twice: delivered again", final.exchange)
