"""The one place the edge reads what protocol version a request speaks.

The SDK's handlers validate `A2A-Version` from the headers the call-context builder copies into
`ServerCallContext.state["headers"]`. This builder decides that value for both bindings: the header, or,
when the header is absent, the `A2A-Version` query parameter the spec (§3.2.6) allows clients to use
instead. Version negotiation proper (accepting 0.3 next to 1.0) is to be added here.
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.utils.constants import VERSION_HEADER
from starlette.requests import Request

__all__ = ["EdgeCallContextBuilder", "requested_version"]

_STATE_VERSION_KEY = VERSION_HEADER.lower()  # Starlette header keys are lowercase


def requested_version(request: Request) -> str | None:
    """The A2A protocol version the request asks for, or None when it names none (which means 0.3)."""
    return request.headers.get(VERSION_HEADER) or request.query_params.get(VERSION_HEADER) or None


class EdgeCallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's default context (user, headers, requested extensions) with the version resolved here."""

    def build(self, request: Request) -> ServerCallContext:
        """Build the call context for `request`; the tenant is filled in afterwards by the SDK dispatchers."""
        context = super().build(request)
        headers = context.state["headers"]
        headers.pop(_STATE_VERSION_KEY, None)
        version = requested_version(request)
        if version is not None:
            headers[_STATE_VERSION_KEY] = version
        return context
