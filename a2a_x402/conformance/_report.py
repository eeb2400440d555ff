"""What a run found: one result per check and target, and whether the merchant conforms.

A merchant conforms when no MUST check failed (and the card could be read, which ``card.served`` is). A
SHOULD or MAY that fails is reported and does not change the exit status. Evidence is the exchange that
showed the failure (request and answer, trimmed by ``UntrustedHttp``), never a private key: the kit's
requests carry signatures and addresses only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from ._catalogue import CheckSpec, Level

__all__ = ["CheckResult", "Outcome", "Report"]


class Outcome(StrEnum):
    """How a check ended for one target."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    """The check does not apply to the target (said why); it neither passes nor fails the run."""


@dataclass
class CheckResult:
    """One check on one target (the card, or an interface such as ``GRPC 1.0 tenant=acme``)."""

    spec: CheckSpec
    target: str
    outcome: Outcome
    detail: str = ""
    evidence: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Report:
    """Every result of a run against one merchant."""

    merchant: str
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    results: list[CheckResult] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when results exist and no MUST check failed."""
        return bool(self.results) and not self.failed_musts

    @property
    def failed_musts(self) -> list[CheckResult]:
        """The failed MUST checks."""
        return [r for r in self.results if r.outcome is Outcome.FAILED and r.spec.level is Level.MUST]

    def counts(self) -> dict[str, int]:
        """``{"MUST passed": n, "MUST failed": n, …}`` over every level and outcome present."""
        counter = Counter(f"{r.spec.level.value} {r.outcome.value}" for r in self.results)
        return dict(sorted(counter.items()))

    def result(self, check_id: str, target: str) -> CheckResult | None:
        """The result of ``check_id`` on ``target``, if it ran."""
        return next((r for r in self.results if r.spec.id == check_id and r.target == target), None)
