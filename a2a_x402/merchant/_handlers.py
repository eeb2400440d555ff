"""A request handler that hands every A2A operation to another one.

The merchant layers request handlers (tenant gate, payment layer, the SDK's handler); each layer
subclasses this and overrides only the operations it has something to say about. A layer that acts the
same around every operation overrides `_call` and `_stream` instead.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from typing import TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)

__all__ = ["DelegatingRequestHandler"]

_T = TypeVar("_T")


class DelegatingRequestHandler(RequestHandler):
    """Delegates every operation to `inner`."""

    def __init__(self, inner: RequestHandler) -> None:
        self._inner = inner

    async def aclose(self) -> None:
        """Close the wrapped handler (drains its running tasks)."""
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()

    async def _call(self, call: Awaitable[_T], context: ServerCallContext) -> _T:
        """The result of one operation of `inner`; the place to act around every non-streaming operation."""
        return await call

    def _stream(self, events: AsyncGenerator[Event], context: ServerCallContext) -> AsyncGenerator[Event]:
        """The events of one streaming operation of `inner`; the place to act around every stream."""
        return events

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        """SendMessage."""
        return await self._call(self._inner.on_message_send(params, context), context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SendStreamingMessage."""
        async for event in self._stream(self._inner.on_message_send_stream(params, context), context):
            yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """GetTask."""
        return await self._call(self._inner.on_get_task(params, context), context)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """ListTasks."""
        return await self._call(self._inner.on_list_tasks(params, context), context)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """CancelTask."""
        return await self._call(self._inner.on_cancel_task(params, context), context)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SubscribeToTask."""
        async for event in self._stream(self._inner.on_subscribe_to_task(params, context), context):
            yield event

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """CreateTaskPushNotificationConfig."""
        return await self._call(self._inner.on_create_task_push_notification_config(params, context), context)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """GetTaskPushNotificationConfig."""
        return await self._call(self._inner.on_get_task_push_notification_config(params, context), context)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """ListTaskPushNotificationConfigs."""
        return await self._call(self._inner.on_list_task_push_notification_configs(params, context), context)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """DeleteTaskPushNotificationConfig."""
        await self._call(self._inner.on_delete_task_push_notification_config(params, context), context)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """GetExtendedAgentCard."""
        return await self._call(self._inner.on_get_extended_agent_card(params, context), context)
