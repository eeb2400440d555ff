"""The suite's check of ERROR log records (`tests/fixtures/error_logs.py`), in a pytest run of its own: an
unmarked test that logs one fails, naming the record; a marked one passes; a mark needs its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

_TESTS = """
import logging
import pytest
from tests.fixtures.error_logs import watch_log

def test_error_unmarked():
    logging.getLogger("a2a_x402.merchant.payments").error("settlement failed\\nits second line")

@pytest.mark.error_logs("why: the test injects the failure")
def test_error_marked():
    logging.getLogger("a2a_x402.merchant.payments").error("settlement failed")

def test_warning_with_a_traceback():
    try:
        {}["missing"]
    except KeyError:
        logging.getLogger("uvicorn.error").warning("a request went wrong", exc_info=True)

def test_refusal_and_unwatched_logger():
    logging.getLogger("a2a_x402.merchant.payments").warning("refused: insufficient funds")
    logging.getLogger("web3.providers").error("not a logger of the services")

@pytest.fixture
def noisy_teardown():
    yield
    logging.getLogger("sqlalchemy.pool").error("connection lost at shutdown")

def test_error_in_teardown(noisy_teardown):
    pass

@pytest.mark.error_logs("")
def test_mark_without_reason():
    pass

def test_process_log(tmp_path):
    log = tmp_path / "merchant.log"
    watch_log(log)
    log.write_text(
        "2026-12-05 05:00:00,001 INFO a2a_x402.merchant.cli started\\n"
        "2026-12-05 05:00:01,002 ERROR a2a_x402.merchant.payments settlement failed\\n"
        "Traceback (most recent call last):\\n"
        '{"level": "WARNING", "logger": "x", "message": "retried", "exception": "Traceback ..."}\\n'
        '{"level": "WARNING", "logger": "x", "message": "refused"}\\n'
    )
"""


def test_watched_records_fail_an_unmarked_test_and_name_themselves(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    pytester.makepyfile(test_logs=_TESTS)

    # Without the captured logs, which would show every record whole.
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "tests.fixtures.error_logs", "--show-capture=no"
    )

    result.assert_outcomes(passed=3, failed=3, errors=2)
    outcomes = {line.split(" ")[1].split("::")[-1]: line.split(" ")[0] for line in _summary(result)}
    assert outcomes == {
        "test_error_unmarked": "FAILED",
        "test_warning_with_a_traceback": "FAILED",
        "test_process_log": "FAILED",
        "test_error_in_teardown": "ERROR",
        "test_mark_without_reason": "ERROR",
    }
    result.stdout.fnmatch_lines(
        [
            "*1 log record(s) at ERROR or with a traceback during call:",
            "*  a2a_x402.merchant.payments ERROR: settlement failed",
            "*  uvicorn.error WARNING: a request went wrong ?traceback: KeyError?",  # fnmatch: [ ] is a set
            "*3 log record(s) at ERROR or with a traceback during call:",
            "*  merchant.log: 2026-12-05 05:00:01,002 ERROR a2a_x402.merchant.payments settlement failed",
            "*  merchant.log: Traceback (most recent call last):",
            '*  merchant.log: {"level": "WARNING", "logger": "x", "message": "retried", "exception"*',
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*1 log record(s) at ERROR or with a traceback during teardown:",
            "*  sqlalchemy.pool ERROR: connection lost at shutdown",
            "*@pytest.mark.error_logs needs its reason*",
        ]
    )
    output = result.stdout.str()
    assert "its second line" not in output  # the first line of a record only
    assert "refused" not in output and "not a logger of the services" not in output


def _summary(result: pytest.RunResult) -> list[str]:
    """The short summary's FAILED and ERROR lines (`-ra`)."""
    return [line for line in result.stdout.lines if line.startswith(("FAILED ", "ERROR "))]
