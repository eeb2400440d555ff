"""`drop_debug_lines`: a dependency's DEBUG lines stay out of every log, whatever its level is set to."""

from __future__ import annotations

import logging

import pytest

from a2a_x402.observability import drop_debug_lines


def test_debug_lines_are_dropped_even_with_the_logger_set_to_debug(caplog: pytest.LogCaptureFixture) -> None:
    drop_debug_lines("tests.quiet.dependency")
    drop_debug_lines("tests.quiet.dependency")  # once is enough: a second call adds nothing
    logger = logging.getLogger("tests.quiet.dependency")
    assert len(logger.filters) == 1
    logger.setLevel(logging.DEBUG)  # as a later configuration, or a test's restore, may leave it
    try:
        with caplog.at_level(logging.DEBUG):
            logger.debug("disclosed claim: secret-value")
            logger.info("an operator's line")
    finally:
        logger.setLevel(logging.NOTSET)
    assert [r.getMessage() for r in caplog.records] == ["an operator's line"]
