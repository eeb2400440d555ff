"""The SDK's request log without signed payments or mandates: its JSON-RPC dispatcher logs each body at
DEBUG.

A client's payment message carries a signed authorization, which anyone who reads it could present
(issue 24, specification §11), and, in the embedded flow, the user's AP2 mandates (§20.4), whose
disclosures are personal data: no log line may hold either, at any level. The dispatcher's DEBUG line is
kept, with every `signature` member and every mandate of the body removed; the body itself, which the
dispatcher goes on to serve, is left untouched (the line gets a copy).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from a2a_x402.extension import AP2_CHECKOUT_MANDATE_KEY, AP2_PAYMENT_MANDATE_KEY

__all__ = ["install_log_redaction"]

# The SDK loggers that write a request's body, and the line that does.
_BODY_LOGGERS = ("a2a.server.routes.jsonrpc_dispatcher",)
_BODY_LINE = "Request body: %s"
_SECRET_MEMBERS = frozenset({"signature", AP2_CHECKOUT_MANDATE_KEY, AP2_PAYMENT_MANDATE_KEY})
_REMOVED = "(removed)"


class _WithoutSignatures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _BODY_LINE and record.args:
            # A record made with one mapping argument keeps the mapping itself as its args.
            body = record.args if isinstance(record.args, Mapping) else record.args[0]
            record.args = (_without_secrets(body),)
        return True


_FILTER = _WithoutSignatures()


def install_log_redaction() -> None:
    """Make the SDK's body-logging loggers drop signatures and mandates from what they write (idempotent)."""
    for name in _BODY_LOGGERS:
        body_logger = logging.getLogger(name)
        if _FILTER not in body_logger.filters:
            body_logger.addFilter(_FILTER)


def _without_secrets(value: object) -> object:
    """A copy of a JSON value with every `signature` and mandate member's value replaced by a fixed marker."""
    if isinstance(value, dict):
        return {
            key: _REMOVED if key in _SECRET_MEMBERS else _without_secrets(item) for key, item in value.items()
        }
    if isinstance(value, list):
        return [_without_secrets(item) for item in value]
    return value
