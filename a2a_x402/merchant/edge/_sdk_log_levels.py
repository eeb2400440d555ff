"""The SDK's lines about a client's mistake as WARNING lines without a traceback.

The a2a-sdk logs at ERROR, with a traceback, a JSON-RPC request that is no valid JSON-RPC request, params
that do not parse, and a call of a capability the card does not declare (push notifications): each is a
client's mistake, answered to the client with its error. An ERROR line is for the operator to act on
(issue 28); these are WARNING lines, the SDK's own words kept. The lines are known by their format strings
(a2a-sdk 1.3); every other ERROR line of the SDK stays one.
"""

from __future__ import annotations

import logging

__all__ = ["install_sdk_log_levels"]

# The SDK loggers, and the format strings of their lines about a client's mistake.
_CLIENT_MISTAKES = {
    "a2a.server.routes.jsonrpc_dispatcher": frozenset(
        {"Failed to validate base JSON-RPC request", "Failed to parse request params"}
    ),
    "a2a.server.request_handlers.request_handler": frozenset({"Validation failure: %s"}),
}


class _ClientMistakeAsWarning(logging.Filter):
    def __init__(self, lines: frozenset[str]) -> None:
        super().__init__()
        self._lines = lines

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.msg in self._lines:
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            # The traceback is the SDK's own parsing; the client was answered with what was wrong.
            record.exc_info, record.exc_text = None, None
        return True


_FILTERS = {name: _ClientMistakeAsWarning(lines) for name, lines in _CLIENT_MISTAKES.items()}


def install_sdk_log_levels() -> None:
    """Make the SDK's loggers write a client's mistakes as WARNING lines (idempotent)."""
    for name, mistake_filter in _FILTERS.items():
        sdk_logger = logging.getLogger(name)
        if mistake_filter not in sdk_logger.filters:
            sdk_logger.addFilter(mistake_filter)
