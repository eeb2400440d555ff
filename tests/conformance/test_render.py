"""`_render`: the four forms of a report say the same thing; a failed SHOULD never fails JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from a2a_x402.conformance import (
    CheckResult,
    Outcome,
    Report,
    check_spec,
    render_console,
    render_json,
    render_junit,
    render_markdown,
)

EVIDENCE = [{"request": "POST /a2a/jsonrpc {...}", "answer": "200 {...|...}"}]


def _report() -> Report:
    report = Report(
        "http://merchant.example/.well-known/agent-card.json", targets=["JSONRPC 1.0 tenant=(default)"]
    )
    target = report.targets[0]
    report.results = [
        CheckResult(
            check_spec("activation.refused"),
            target,
            Outcome.FAILED,
            "expected EXTENSION_SUPPORT_REQUIRED",
            EVIDENCE,
        ),
        CheckResult(check_spec("activation.echoed"), target, Outcome.FAILED, "no A2A-Extensions", EVIDENCE),
        CheckResult(check_spec("terms.integers"), target, Outcome.SKIPPED, "gRPC"),
        CheckResult(check_spec("terms.placement"), target, Outcome.PASSED),
    ]
    return report


def test_a_failed_must_fails_the_run_and_a_failed_should_does_not() -> None:
    report = _report()
    assert not report.ok and [r.spec.id for r in report.failed_musts] == ["activation.refused"]
    report.results = report.results[1:]
    assert report.ok
    assert not Report("x").ok  # no results at all is no evidence of conformance


def test_console_lists_failures_with_their_evidence() -> None:
    text = render_console(_report())
    assert "FAIL MUST   activation.refused [JSONRPC 1.0 tenant=(default)] §4.3" in text
    assert "    > POST /a2a/jsonrpc {...}" in text and "terms.placement" not in text
    assert text.endswith("DOES NOT CONFORM: 1 MUST failed\n")


def test_json_has_every_result() -> None:
    document = json.loads(render_json(_report()))
    assert document["conforms"] is False
    assert [r["outcome"] for r in document["results"]] == ["failed", "failed", "skipped", "passed"]
    assert document["results"][0]["evidence"] == EVIDENCE
    assert document["counts"] == {"MUST failed": 1, "MUST passed": 1, "SHOULD failed": 1, "SHOULD skipped": 1}


def test_markdown_escapes_table_cells_and_shows_evidence() -> None:
    text = render_markdown(_report())
    assert "| `activation.refused` | MUST | 4.3 |" in text
    assert "### `activation.echoed` on JSONRPC 1.0 tenant=(default)" in text
    assert "200 {...|...}" in text  # in the evidence block, where a pipe needs no escaping


def test_junit_fails_only_musts() -> None:
    suite = ET.fromstring(render_junit(_report())).find("testsuite")  # noqa: S314 - the kit's own output
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        "4",
        "1",
        "2",
    )
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["activation.refused (MUST §4.3)"].find("failure") is not None
    echoed = cases["activation.echoed (SHOULD §4.1)"].find("skipped")
    assert echoed is not None and echoed.get("message", "").startswith("SHOULD not met")
