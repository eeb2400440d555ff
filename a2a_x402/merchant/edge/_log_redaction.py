"""The SDK's request log without signed payments: its JSON-RPC dispatcher logs each body at DEBUG.

A client's payment message carries a signed authorization, which anyone who reads it could present
(issue 24, specification §11): no log line may hold one, at any level. The dispatcher's DEBUG line is kept,
with every `signature` member of the body removed; the body itself, which the dispatcher goes on to
serve, is left untouched (the line gets a copy).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

__all__ = ["install_log_redaction"]

# The SDK loggers that write a request's body, and the line that does.
_BODY_LOGGERS = ("a2a.server.routes.jsonrpc_dispatcher",)
_BODY_LINE = "Request body: %s"
_SIGNATURE = "signature"
_REMOVED = "(removed)"


class _WithoutSignatures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _BODY_LINE and record.args:
            # A record made with one mapping argument keeps the mapping itself as its args.
            body = record.args if isinstance(record.args, Mapping) else record.args[0]
            record.args = (_without_signatures(body),)
        return True


_FILTER = _WithoutSignatures()


def install_log_redaction() -> None:
    """Make the SDK's body-logging loggers drop signatures from what they write (idempotent)."""
    for name in _BODY_LOGGERS:
        body_logger = logging.getLogger(name)
        if _FILTER not in body_logger.filters:
            body_logger.addFilter(_FILTER)


def _without_signatures(value: object) -> object:
    """A copy of a JSON value with every `signature` member's value replaced by a fixed marker."""
    if isinstance(value, dict):
        return {
            key: _REMOVED if key == _SIGNATURE else _without_signatures(item) for key, item in value.items()
        }
    if isinstance(value, list):
        return [_without_signatures(item) for item in value]
    return value
