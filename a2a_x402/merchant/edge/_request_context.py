"""Request-context building that keeps a follow-up message in its task's context.

A2A requires the agent to infer the context from the task when a message names only `taskId`. a2a-sdk
1.3.0's `SimpleRequestContextBuilder` instead generates a fresh context id for such a message (the handler
passes `context_id=None` and `RequestContext._check_or_generate_context_id` fills in a UUID), so the message
lands in the task history under a context that is not the task's. This builder looks the task up first,
owner-scoped like every other read, and hands its context id to the SDK.
"""

from __future__ import annotations

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import SendMessageRequest, Task

__all__ = ["TaskContextRequestContextBuilder"]


class TaskContextRequestContextBuilder(SimpleRequestContextBuilder):
    """`SimpleRequestContextBuilder` that takes a follow-up's missing context id from its task."""

    def __init__(self, task_store: TaskStore) -> None:
        super().__init__()
        self._tasks = task_store

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        """Build the request context; with only `task_id` set, `context_id` comes from the stored task."""
        if task_id and not context_id:
            stored = await self._tasks.get(task_id, context)
            if stored is not None:
                context_id = stored.context_id
        return await super().build(
            context=context, params=params, task_id=task_id, context_id=context_id, task=task
        )
