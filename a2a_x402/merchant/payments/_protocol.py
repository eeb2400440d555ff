"""Which A2A version a request is served in, as the edge negotiated it."""

from __future__ import annotations

from a2a.server.context import ServerCallContext

__all__ = ["NEGOTIATED_VERSION_KEY", "protocol_version"]

NEGOTIATED_VERSION_KEY = "a2a_version"
"""The `ServerCallContext.state` key under which the edge records the negotiated `Major.Minor`."""


def protocol_version(call_context: ServerCallContext) -> str:
    """The negotiated A2A version; without one, the request's `A2A-Version` header (missing means 0.3)."""
    negotiated = call_context.state.get(NEGOTIATED_VERSION_KEY)
    if isinstance(negotiated, str):
        return negotiated
    headers = call_context.state.get("headers") or {}
    return str(headers.get("a2a-version", "")).strip() or "0.3"
