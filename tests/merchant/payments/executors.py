"""Delegate executors for the payment-layer tests: the text-stats skill, made to fail or to act mid-work.

They stand in for the merchant's product inside `PaymentExecutor`, so the tests can cause what a real skill
might do (raise, give up, take long) and act at the one moment that matters: after the payment verified,
before it settles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part

from a2a_x402.merchant.demo_skill import TextStatsExecutor

__all__ = ["FAILURE_TEXT", "FailingExecutor", "GivingUpExecutor", "MidWorkExecutor"]

FAILURE_TEXT = "the analysis backend is down"


class FailingExecutor(AgentExecutor):
    """Produces an artifact, then raises: the work failed."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Emit a (partial) artifact and crash."""
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.add_artifact([Part(text="partial result")], name="partial")
        raise RuntimeError(FAILURE_TEXT)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing runs for long enough to cancel."""


class GivingUpExecutor(AgentExecutor):
    """Produces an artifact, then ends the task FAILED on its own."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Emit a (partial) artifact and fail the task."""
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.add_artifact([Part(text="partial result")], name="partial")
        await updater.failed(updater.new_agent_message([Part(text=FAILURE_TEXT)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing runs for long enough to cancel."""


class MidWorkExecutor(AgentExecutor):
    """The text-stats skill, calling `hook` (blocking, so in a worker thread) before it finishes.

    The hook runs while the payment is verified and not yet settled: a test does something on the chain
    there, or records that the work ran.
    """

    def __init__(self, hook: Callable[[], None]) -> None:
        self._hook = hook
        self._skill = TextStatsExecutor()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the hook, then the skill."""
        await asyncio.to_thread(self._hook)
        await self._skill.execute(context, event_queue)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the skill."""
        await self._skill.cancel(context, event_queue)
