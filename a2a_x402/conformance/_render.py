"""A report in four forms: a console summary, JSON, Markdown and JUnit XML (one test case per result)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from ._report import CheckResult, Outcome, Report

__all__ = ["render_console", "render_json", "render_junit", "render_markdown"]

_MARK = {Outcome.PASSED: "pass", Outcome.FAILED: "FAIL", Outcome.SKIPPED: "skip"}


def _evidence_lines(result: CheckResult) -> Iterable[str]:
    for exchange in result.evidence:
        yield f"    > {exchange['request']}"
        yield f"    < {exchange['answer']}"


def render_console(report: Report, *, verbose: bool = False) -> str:
    """A short summary: every failure (with evidence), the counts, and the verdict."""
    lines = [f"x402 A2A conformance: {report.merchant}"]
    lines += [f"  target: {target}" for target in report.targets]
    for result in report.results:
        if result.outcome is Outcome.FAILED or verbose:
            mark = _MARK[result.outcome]
            spec = result.spec
            lines.append(f"{mark} {spec.level.value:<6} {spec.id} [{result.target}] §{spec.section}")
            if result.detail:
                lines.append(f"    {result.detail}")
            if result.outcome is Outcome.FAILED:
                lines += _evidence_lines(result)
    lines.append(", ".join(f"{key}: {value}" for key, value in report.counts().items()))
    lines.append(
        "CONFORMS: every MUST passed"
        if report.ok
        else f"DOES NOT CONFORM: {len(report.failed_musts)} MUST failed"
    )
    return "\n".join(lines) + "\n"


def render_json(report: Report) -> str:
    """The whole report as JSON (results in run order)."""
    document = {
        "merchant": report.merchant,
        "startedAt": report.started_at.isoformat(),
        "conforms": report.ok,
        "targets": report.targets,
        "counts": report.counts(),
        "results": [
            {
                "id": r.spec.id,
                "level": r.spec.level.value,
                "section": r.spec.section,
                "title": r.spec.title,
                "target": r.target,
                "outcome": r.outcome.value,
                "detail": r.detail,
                "evidence": r.evidence,
            }
            for r in report.results
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """A Markdown report: verdict, counts, a table of every result, then the evidence of each failure."""
    verdict = (
        "conforms (every MUST passed)"
        if report.ok
        else f"does not conform ({len(report.failed_musts)} MUST failed)"
    )
    lines = [f"# x402 A2A conformance report: {report.merchant}", "", f"**Verdict:** {verdict}.", ""]
    lines += [f"- {key}: {value}" for key, value in report.counts().items()]
    lines += [
        "",
        "| check | level | § | target | outcome | detail |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in report.results:
        lines.append(
            f"| `{r.spec.id}` | {r.spec.level.value} | {r.spec.section} | {_cell(r.target)} | "
            f"{r.outcome.value} | {_cell(r.detail)} |"
        )
    failures = [r for r in report.results if r.outcome is Outcome.FAILED]
    if failures:
        lines += ["", "## Evidence of the failures", ""]
    for r in failures:
        lines += [
            f"### `{r.spec.id}` on {r.target}",
            "",
            r.detail,
            "",
            "```text",
            *_evidence_lines(r),
            "```",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def render_junit(report: Report) -> str:
    """JUnit XML: one suite per target, one test case per check; failed SHOULDs are marked, not failed."""
    suites = ET.Element("testsuites", name="x402-a2a-conformance")
    by_target: dict[str, list[CheckResult]] = {}
    for r in report.results:
        by_target.setdefault(r.target, []).append(r)
    for target, results in by_target.items():
        failed = [r for r in results if r.outcome is Outcome.FAILED and r.spec.level.value == "MUST"]
        skipped = [r for r in results if r.outcome is not Outcome.PASSED and r not in failed]
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=target,
            tests=str(len(results)),
            failures=str(len(failed)),
            skipped=str(len(skipped)),
        )
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=target,
                name=f"{r.spec.id} ({r.spec.level.value} §{r.spec.section})",
            )
            text = "\n".join([r.detail, *_evidence_lines(r)])
            if r in failed:
                ET.SubElement(case, "failure", message=r.detail[:500]).text = text
            elif r.outcome is Outcome.FAILED:
                ET.SubElement(
                    case, "skipped", message=f"{r.spec.level.value} not met: {r.detail[:400]}"
                ).text = text
            elif r.outcome is Outcome.SKIPPED:
                ET.SubElement(case, "skipped", message=r.detail[:500])
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
