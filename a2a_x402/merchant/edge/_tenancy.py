"""Tenant scoping of A2A requests: the owner key of stored tasks, and the unknown-tenant gate.

The a2a-sdk scopes every task-store read and write by an owner string that its default resolver takes from
the user alone, so two tenants' anonymous callers would share one owner. `tenant_owner` puts the tenant
into that key: a task is visible only to requests of the tenant (and user) that created it, and every other
tenant gets TaskNotFound from the SDK's own owner-scoped lookups.

`TenantGate` wraps the request handler and refuses requests for tenants the registry does not know before
anything is read or written. Task operations (get, cancel, subscribe, push configs) answer TaskNotFound,
exactly as for a task the caller cannot see; SendMessage, SendStreamingMessage and ListTasks, which name no
existing task, answer InvalidParams ("unknown tenant") so a misconfigured client learns what is wrong.

On a tenant's own URLs (A2A 0.3 under `paths.TENANT_ROOT_PATH`) the tenant is the URL's: the context builder
records it under `URL_TENANT_KEY`, and the gate puts it on the call context and the request before anything
else reads them. The SDK's 0.3 JSON-RPC adapter overwrites the context's tenant after building it (with
`params.tenant`, which no 0.3 request has), so the URL's tenant must be restored here, in the handler.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncGenerator

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
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from a2a_x402.merchant._handlers import DelegatingRequestHandler
from a2a_x402.merchant.tenants import TenantRegistry

__all__ = ["URL_TENANT_KEY", "TenantGate", "tenant_owner"]

URL_TENANT_KEY = "a2a_url_tenant"
"""`ServerCallContext.state` key of the tenant a request's URL names, when the URL is the routing key."""

# The SDK's task table caps ids (`tasks.id`, `tasks.context_id`) at 36 characters, i.e. a UUID.
_MAX_ID_CHARS = 36
# Width of the `owner` column.
_MAX_OWNER_CHARS = 255

# The requests a tenant is pinned on: every A2A 1.0 request message has a `tenant` field.
_Scoped = (
    SendMessageRequest
    | GetTaskRequest
    | ListTasksRequest
    | CancelTaskRequest
    | SubscribeToTaskRequest
    | TaskPushNotificationConfig
    | GetTaskPushNotificationConfigRequest
    | ListTaskPushNotificationConfigsRequest
    | DeleteTaskPushNotificationConfigRequest
    | GetExtendedAgentCardRequest
)


def tenant_owner(context: ServerCallContext) -> str:
    """The task-store owner key for a request: its tenant and its user.

    Tenant ids never contain "/", so the key is unambiguous. A user name too long for the owner column is
    replaced by its SHA-256, which keeps it unique without truncating two users into one owner.
    """
    owner = f"{context.tenant}/{context.user.user_name}"
    if len(owner) <= _MAX_OWNER_CHARS:
        return owner
    digest = hashlib.sha256(context.user.user_name.encode()).hexdigest()
    return f"{context.tenant}/sha256:{digest}"


class TenantGate(DelegatingRequestHandler):
    """A request handler that admits only requests for configured tenants, then delegates to `inner`."""

    def __init__(self, inner: RequestHandler, tenants: TenantRegistry) -> None:
        super().__init__(inner)
        self._tenants = tenants

    def _require_task_tenant(self, params: _Scoped, context: ServerCallContext) -> None:
        _pin_url_tenant(params, context)
        # Same error as an invisible task: an unknown tenant has no tasks.
        if context.tenant not in self._tenants:
            raise TaskNotFoundError

    def _require_tenant(self, params: _Scoped, context: ServerCallContext) -> None:
        _pin_url_tenant(params, context)
        if context.tenant not in self._tenants:
            raise InvalidParamsError(message=f"Unknown tenant {context.tenant!r}")

    def _check_send(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        self._require_tenant(params, context)
        _check_client_message(params.message)
        # No stored task has a longer id, so a longer taskId names an unknown task, which is TaskNotFound
        # whatever its length (A2A §3.4.2). A new task with a longer context id would not fit its row on
        # PostgreSQL: refused up front, so no oversized id is ever stored.
        if len(params.message.task_id) > _MAX_ID_CHARS:
            raise TaskNotFoundError
        if len(params.message.context_id) > _MAX_ID_CHARS:
            raise InvalidParamsError(message=f"message.contextId must be at most {_MAX_ID_CHARS} characters")

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        """SendMessage for a known tenant."""
        self._check_send(params, context)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SendStreamingMessage for a known tenant."""
        self._check_send(params, context)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """GetTask within the caller's tenant."""
        self._require_task_tenant(params, context)
        return await super().on_get_task(params, context)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """ListTasks within the caller's tenant."""
        self._require_tenant(params, context)
        return await super().on_list_tasks(params, context)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """CancelTask within the caller's tenant."""
        self._require_task_tenant(params, context)
        return await super().on_cancel_task(params, context)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SubscribeToTask within the caller's tenant."""
        self._require_task_tenant(params, context)
        async for event in super().on_subscribe_to_task(params, context):
            yield event

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """CreateTaskPushNotificationConfig within the caller's tenant."""
        self._require_task_tenant(params, context)
        return await super().on_create_task_push_notification_config(params, context)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """GetTaskPushNotificationConfig within the caller's tenant."""
        self._require_task_tenant(params, context)
        return await super().on_get_task_push_notification_config(params, context)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """ListTaskPushNotificationConfigs within the caller's tenant."""
        self._require_task_tenant(params, context)
        return await super().on_list_task_push_notification_configs(params, context)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """DeleteTaskPushNotificationConfig within the caller's tenant."""
        self._require_task_tenant(params, context)
        await super().on_delete_task_push_notification_config(params, context)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """GetExtendedAgentCard for a known tenant."""
        self._require_tenant(params, context)
        return await super().on_get_extended_agent_card(params, context)


def _pin_url_tenant(params: _Scoped, context: ServerCallContext) -> None:
    """The tenant of the request's URL, when it names one, on `context` and `params` (see the module)."""
    tenant = context.state.get(URL_TENANT_KEY)
    if isinstance(tenant, str):
        context.tenant = tenant
        params.tenant = tenant


def _check_client_message(message: Message) -> None:
    """Refuse what no task can be started or continued from (the SDK would fail on it after storing)."""
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(message="message.role: a client's message is ROLE_USER")
    if not message.parts:
        raise InvalidParamsError(message="message.parts: a message needs at least one part")
    for index, part in enumerate(message.parts):
        if part.WhichOneof("content") is None:
            raise InvalidParamsError(message=f"message.parts[{index}]: a part needs text, raw, url or data")
        if part.HasField("text") and not part.text:
            raise InvalidParamsError(message=f"message.parts[{index}].text: must not be empty")
