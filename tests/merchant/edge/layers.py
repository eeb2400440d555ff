"""A handler layer for the edge tests: behaviour a real layer (the payment layer, an auth layer) adds.

`MembersOnly` plays a layer that needs an extension: a message saying "members-only" without
`MEMBERS_EXTENSION` activated is refused with ExtensionSupportRequired, and a message saying "explode"
fails unexpectedly inside the handler (the server must answer InternalError, not drop the request), on
SendMessage and SendStreamingMessage alike. It
also plays a deployment that declares an extended Agent Card but has none configured: the edge itself
never declares one, so without the layer the SDK answers GetExtendedAgentCard with UnsupportedOperation.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.types import AgentCard, GetExtendedAgentCardRequest, Message, SendMessageRequest, Task
from a2a.utils.errors import ExtendedAgentCardNotConfiguredError, ExtensionSupportRequiredError

from a2a_x402.merchant._handlers import DelegatingRequestHandler

MEMBERS_EXTENSION = "https://example.org/ext/members/v1"


class MembersOnly(DelegatingRequestHandler):
    """Refuses "members-only" messages unless `MEMBERS_EXTENSION` is activated; "explode" raises."""

    @staticmethod
    def _check(params: SendMessageRequest, context: ServerCallContext) -> None:
        text = params.message.parts[0].text if params.message.parts else ""
        if text == "members-only" and MEMBERS_EXTENSION not in context.requested_extensions:
            raise ExtensionSupportRequiredError(message=f"activate {MEMBERS_EXTENSION}")
        if text == "explode":
            raise RuntimeError("the layer broke")

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        """SendMessage after the members check."""
        self._check(params, context)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SendStreamingMessage after the members check."""
        self._check(params, context)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """Declared but not configured."""
        raise ExtendedAgentCardNotConfiguredError
