"""The A2A error an operation raised, remembered on its HTTP request for the route that answers it.

The SDK's 0.3 compatibility layer answers every A2A error without an A2A 0.3 JSON-RPC code
(ExtensionSupportRequired, VersionNotSupported: 1.0 additions) as InternalError (-32603) with the error's
message, and an unexpected exception as InternalError with the exception's text. Neither can be told apart
from the answer alone. `RememberFailures`, the outermost handler layer, records the A2AError an operation
raised on the request the call context was built from (`open_failure_slot`), so the 0.3 JSON-RPC route can
answer it with its own code (`_routes`) and hide the text of anything else.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
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
from a2a.utils.errors import A2AError
from starlette.requests import Request

from merchant._handlers import DelegatingRequestHandler

__all__ = ["RememberFailures", "failure_of", "open_failure_slot"]

_SLOT_KEY = "a2a_failure_slot"
_FAILURE_KEY = "a2a_failure"


def open_failure_slot(request: Request, context: ServerCallContext) -> None:
    """Let the A2A error of the call made with `context` be read back from `request` (`failure_of`)."""
    context.state[_SLOT_KEY] = request.scope.setdefault("state", {})


def failure_of(request: Request) -> A2AError | None:
    """The A2A error the handler raised for `request`, if any."""
    failure = request.scope.get("state", {}).get(_FAILURE_KEY)
    return failure if isinstance(failure, A2AError) else None


def _remember(context: ServerCallContext, failure: A2AError) -> None:
    slot: Any = context.state.get(_SLOT_KEY)
    if isinstance(slot, dict):
        slot[_FAILURE_KEY] = failure


class RememberFailures(DelegatingRequestHandler):
    """Delegates every operation to `inner` and remembers the A2AError it raised (see the module)."""

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        """SendMessage."""
        try:
            return await super().on_message_send(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SendStreamingMessage."""
        try:
            async for event in super().on_message_send_stream(params, context):
                yield event
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """GetTask."""
        try:
            return await super().on_get_task(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """ListTasks."""
        try:
            return await super().on_list_tasks(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """CancelTask."""
        try:
            return await super().on_cancel_task(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SubscribeToTask."""
        try:
            async for event in super().on_subscribe_to_task(params, context):
                yield event
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """CreateTaskPushNotificationConfig."""
        try:
            return await super().on_create_task_push_notification_config(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """GetTaskPushNotificationConfig."""
        try:
            return await super().on_get_task_push_notification_config(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """ListTaskPushNotificationConfigs."""
        try:
            return await super().on_list_task_push_notification_configs(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """DeleteTaskPushNotificationConfig."""
        try:
            await super().on_delete_task_push_notification_config(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """GetExtendedAgentCard."""
        try:
            return await super().on_get_extended_agent_card(params, context)
        except A2AError as exc:
            _remember(context, exc)
            raise
