"""Closing the SDK's active task when it refuses to start, so its queue dispatchers do not leak.

a2a-sdk 1.3's `ActiveTaskRegistry.get_or_create` builds an `ActiveTask` (whose two `EventQueueSource`s start
their dispatcher tasks at once) and then starts it. When `start()` refuses (the task is already in a final
state, e.g. a payment presented again; or the caller may not see it), the task is marked finished and
dropped from the registry, but its queues are never closed: the dispatchers stay pending until the garbage
collector destroys them, logging `Task was destroyed but it is pending!` (and OpenTelemetry's context
detach errors) at ERROR under normal traffic. A sibling of a2aproject/a2a-python#1101.

The SDK's request handler has no way to be given a registry, so `close_refused_tasks` changes the class of
the one it built to `ClosingActiveTaskRegistry`, which closes such a task before the refusal propagates.
"""

from __future__ import annotations

from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.agent_execution.active_task_registry import ActiveTaskRegistry
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import Message

__all__ = ["ClosingActiveTaskRegistry", "close_refused_tasks"]


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
