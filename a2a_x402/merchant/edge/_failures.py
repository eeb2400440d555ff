"""The A2A error an operation raised, remembered on its HTTP request for the route that answers it.

The SDK's 0.3 compatibility layer answers every A2A error without an A2A 0.3 JSON-RPC code
(ExtensionSupportRequired, VersionNotSupported: 1.0 additions) as InternalError (-32603) with the error's
message, and an unexpected exception as InternalError with the exception's text. Neither can be told apart
from the answer alone. `RememberFailures`, the outermost handler layer, records the A2AError an operation
raised on the request the call context was built from (`open_failure_slot`), so the 0.3 JSON-RPC route can
answer it with its own code (`_routes`) and hide the text of anything else.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.utils.errors import A2AError
from starlette.requests import Request

from a2a_x402.merchant._handlers import DelegatingRequestHandler

__all__ = ["RememberFailures", "failure_of", "open_failure_slot"]

_SLOT_KEY = "a2a_failure_slot"
_FAILURE_KEY = "a2a_failure"

_T = TypeVar("_T")


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

    async def _call(self, call: Awaitable[_T], context: ServerCallContext) -> _T:
        try:
            return await call
        except A2AError as exc:
            _remember(context, exc)
            raise

    async def _stream(
        self, events: AsyncGenerator[Event], context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        try:
            async for event in events:
                yield event
        except A2AError as exc:
            _remember(context, exc)
            raise
