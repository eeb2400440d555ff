"""The observability tests' fixture: every logger's level and the root's handlers put back after each test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def restored_logging() -> Iterator[None]:
    """Put the root logger's handlers and level, and every logger's level, back after the test.

    `configure_logging` replaces the root's handlers and sets the level of each dependency it holds down
    (httpx, SQLAlchemy, a2a-sdk, …). Every logger known at the start is restored, and those created during
    the test are reset, so that no list here can miss one: a DEBUG run left httpx at DEBUG, and a later
    test's log capture then held httpx's request lines (query strings included).
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    manager = logging.Logger.manager
    loggers = manager.loggerDict.items()
    levels = {name: logger.level for name, logger in loggers if isinstance(logger, logging.Logger)}
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, logger in list(manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            logger.setLevel(levels.get(name, logging.NOTSET))
