"""The SDK's active tasks at their end: closed when they refuse to start, and a message that meets one
being closed refused as a message to a finished task.

a2a-sdk 1.3's `ActiveTaskRegistry.get_or_create` builds an `ActiveTask` (whose two `EventQueueSource`s start
their dispatcher tasks at once) and then starts it. When `start()` refuses (the task is already in a final
state, e.g. a payment presented again; or the caller may not see it), the task is marked finished and
dropped from the registry, but its queues are never closed: the dispatchers stay pending until the garbage
collector destroys them, logging `Task was destroyed but it is pending!` (and OpenTelemetry's context
detach errors) at ERROR under normal traffic. A sibling of a2aproject/a2a-python#1101.

The SDK's request handler has no way to be given a registry, so `close_refused_tasks` changes the class of
the one it built to `ClosingActiveTaskRegistry`, which closes such a task before the refusal propagates.

A message that reaches an active task while it is being closed (a cancel, or the payment that raced it)
meets the task's closed request queue: the SDK lets `QueueShutDown` through, answered as an internal error
and logged at ERROR with its traceback, for what is a client's message arriving a moment late.
`EndedTaskRefusals`, the layer around the SDK's handler, answers it as the SDK answers a message to a task
that has finished: `UnsupportedOperationError`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from typing import TypeVar

from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.agent_execution.active_task_registry import ActiveTaskRegistry
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import Message

# The SDK's own alias of the exception its queues raise once closed (asyncio's, or culsans' before 3.13).
from a2a.utils._async_queue_compat import QueueShutDown
from a2a.utils.errors import UnsupportedOperationError

from a2a_x402.merchant._handlers import DelegatingRequestHandler

__all__ = ["ClosingActiveTaskRegistry", "EndedTaskRefusals", "close_refused_tasks"]

_T = TypeVar("_T")
_ENDED = "the task has ended and takes no more messages"


class ClosingActiveTaskRegistry(ActiveTaskRegistry):
    """`ActiveTaskRegistry` that closes an active task it created when the task refuses to start."""

    async def get_or_create(
        self,
        task_id: str,
        call_context: ServerCallContext,
        context_id: str | None = None,
        create_task_if_missing: bool = False,
        initial_message: Message | None = None,
    ) -> ActiveTask:
        """The SDK's `get_or_create`; a task this call created and could not start is closed first."""
        before = await self.get(task_id)
        try:
            return await super().get_or_create(
                task_id,
                call_context,
                context_id=context_id,
                create_task_if_missing=create_task_if_missing,
                initial_message=initial_message,
            )
        except BaseException:
            created = await self.get(task_id)
            # Only the one this call made and failed to start: a live task another request put there since,
            # or the one found before this call, is left alone.
            if created is not None and created is not before and created.is_finished:
                await created.aclose()
            raise


def close_refused_tasks(handler: DefaultRequestHandler) -> None:
    """Make `handler`'s active task registry close the tasks that refuse to start (see the module)."""
    registry = handler._active_task_registry  # the SDK has no public way to provide one
    registry.__class__ = ClosingActiveTaskRegistry


class EndedTaskRefusals(DelegatingRequestHandler):
    """Refuses a message that met its active task being closed, as the SDK refuses one to a finished task."""

    async def _call(self, call: Awaitable[_T], context: ServerCallContext) -> _T:
        try:
            return await call
        except QueueShutDown:
            raise UnsupportedOperationError(message=_ENDED) from None

    async def _stream(
        self, events: AsyncGenerator[Event], context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        try:
            async for event in events:
                yield event
        except QueueShutDown:
            raise UnsupportedOperationError(message=_ENDED) from None
