"""What a caller may reach: its own tasks when authenticated; by id and named context only when anonymous.

Every task read and write of the SDK is scoped by the task store's owner key, `tenant/principal`
(`_tenancy.tenant_owner`), so an authenticated caller reaches only the tasks it created: any other task,
its push configs and its stream are TaskNotFound, exactly as for a task that does not exist. All anonymous
callers of a tenant share the owner `tenant/`; among them a task id (a server-made UUID4, 122 random bits)
and a context id (likewise) are capabilities, so this layer, inside the tenant gate, adds:

- a tenant whose `anonymous_callers` is false refuses a caller without credentials, and a credential issued
  at another tenant is refused at this one (InvalidRequest, before anything is read);
- an anonymous ListTasks lists only within the `contextId` it names, and nothing without one (A2A 1.0
  §3.1.4: list results MUST be scoped to what the caller is authorized to see);
- an anonymous caller may start a task only in a context the server issued: a new task (no `taskId`) naming
  a `contextId` that holds none of the tenant's anonymous tasks is InvalidParams, so no anonymous context
  id is ever chosen (and so guessable) by a client. A2A lets a server refuse a context id it does not know.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from typing import TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import RequestHandler
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Message, SendMessageRequest, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError, InvalidRequestError

from a2a_x402.merchant._handlers import DelegatingRequestHandler
from a2a_x402.merchant.callers import caller_of, valid_at
from a2a_x402.merchant.tenants import TenantRegistry

__all__ = ["CallerScope"]

_T = TypeVar("_T")

ANONYMOUS_REFUSED = (
    "this tenant serves only callers with credentials: send Authorization: Bearer <token> "
    "(the Agent Card's securitySchemes)"
)
FOREIGN_CREDENTIAL = "the credential presented is not valid at this tenant"
UNKNOWN_CONTEXT = (
    "message.contextId: a caller without credentials may only name a context the server issued; "
    "omit contextId to start a new one"
)


class CallerScope(DelegatingRequestHandler):
    """The caller rules of the module around `inner`; the tenant is already pinned (`TenantGate`)."""

    def __init__(self, inner: RequestHandler, tenants: TenantRegistry, task_store: TaskStore) -> None:
        super().__init__(inner)
        self._tenants = tenants
        self._tasks = task_store

    def _admit(self, context: ServerCallContext) -> None:
        caller = caller_of(context.user)
        if caller is not None:
            if not valid_at(caller, context.tenant):
                raise InvalidRequestError(message=FOREIGN_CREDENTIAL)
            return
        tenant = self._tenants.get(context.tenant)
        if tenant is not None and not tenant.anonymous_callers:
            raise InvalidRequestError(message=ANONYMOUS_REFUSED)

    async def _call(self, call: Awaitable[_T], context: ServerCallContext) -> _T:
        try:
            self._admit(context)
        except BaseException:
            # The operation's coroutine was made but will never run: close it so it is not reported.
            close = getattr(call, "close", None)
            if close is not None:
                close()
            raise
        return await call

    def _stream(self, events: AsyncGenerator[Event], context: ServerCallContext) -> AsyncGenerator[Event]:
        self._admit(context)
        return events

    async def _check_new_context(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        message = params.message
        if caller_of(context.user) is not None or message.task_id or not message.context_id:
            return
        probe = ListTasksRequest(tenant=params.tenant, context_id=message.context_id, page_size=1)
        if not (await self._tasks.list(probe, context)).tasks:
            raise InvalidParamsError(message=UNKNOWN_CONTEXT)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        """SendMessage; an anonymous new task only in a context the server issued."""
        self._admit(context)
        await self._check_new_context(params, context)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SendStreamingMessage; an anonymous new task only in a context the server issued."""
        self._admit(context)
        await self._check_new_context(params, context)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """ListTasks; an anonymous caller's lists nothing without a contextId."""
        self._admit(context)
        if caller_of(context.user) is None and not params.context_id:
            return ListTasksResponse(page_size=params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE, total_size=0)
        return await super().on_list_tasks(params, context)
