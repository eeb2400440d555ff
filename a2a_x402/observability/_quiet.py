"""Dependencies whose DEBUG lines hold credentials, held above DEBUG whatever the levels are set to."""

from __future__ import annotations

import logging

__all__ = ["drop_debug_lines"]


class _BelowInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO


_BELOW_INFO = _BelowInfo()


def drop_debug_lines(name: str) -> None:
    """Drop every line below INFO that the logger `name` itself logs, whatever its level or the root's.

    A level can be lowered again by anyone who configures logging after us (a test's log capture, an
    application's `dictConfig`); a filter on the logger stays. For libraries that log secrets at DEBUG,
    such as `sd_jwt`, which logs each claim an AP2 mandate discloses.
    """
    logger = logging.getLogger(name)
    if _BELOW_INFO not in logger.filters:
        logger.addFilter(_BELOW_INFO)
