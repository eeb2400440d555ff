"""The frame every check runs in: one result per check and target, whatever happens inside it.

``Probe.check(id)`` is a context manager: the block passes unless it calls ``fail``, meets a merchant
fault (timeout, size, not JSON, not A2A), terms the kit will not sign, or a chain read that fails, each of
which is recorded as the check's failure with its evidence. ``NotApplicable`` records a skip with the
reason. ``Probe.scenario`` closes a sequence of dependent checks: those it did not reach are failed with the
reason the sequence stopped, so a merchant cannot pass a check by breaking the step before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from a2a_x402.observability import failure_reason

from ._card import Discovery
from ._catalogue import check_spec
from ._chain import ChainError, ChainReader
from ._http import Exchange, MerchantFault, UntrustedHttp
from ._report import CheckResult, Outcome, Report
from ._signer import Signer, UnsafeTerms

__all__ = ["CheckFailed", "NotApplicable", "Probe", "Run", "fail"]


class CheckFailed(Exception):
    """A check's requirement is not met."""

    def __init__(self, detail: str, exchanges: Iterable[Exchange | None] = ()) -> None:
        super().__init__(detail)
        self.exchanges = [e for e in exchanges if e is not None]


class NotApplicable(Exception):
    """The check does not apply to this target (the reason is the message)."""


def fail(detail: str, *exchanges: Exchange | None) -> CheckFailed:
    """The exception failing a check with ``detail`` and the exchanges that show it (``raise fail(…)``)."""
    return CheckFailed(detail, exchanges)


@dataclass
class Unspent:
    """An authorization a check expects never to be used; the run checks it again at the end."""

    check_id: str
    target: str
    asset: str
    """Where the nonce is kept: the EIP-3009 token, or Permit2 (``Signed.nonce_at``)."""
    payer: str
    nonce: str


@dataclass
class Run:
    """What every check of one run shares."""

    report: Report
    discovery: Discovery
    http: UntrustedHttp
    chain: ChainReader
    signer: Signer
    start_block: int
    timeout_s: float
    max_bytes: int
    unspent: list[Unspent] = field(default_factory=list)
    approve_permit2: bool = False
    """Whether the kit may approve Permit2 for the payer (a transaction the payer pays gas for)."""
    failing_request: str = ""
    """A request the operator knows makes the metered work fail (empty: the check does not apply)."""
    approving: asyncio.Lock = field(default_factory=asyncio.Lock)
    ap2_issuer_key: Mapping[str, str] | None = field(default=None, repr=False)
    """The private JWK of an issuer the merchant trusts for the AP2 tenants under test (None: the checks
    presenting mandates do not apply)."""
    allow_insecure_jwks: bool = False
    """Development: take a ``jwksUrl`` of plain http on the loopback host as if it were https."""
    jwks: dict[str, Any] = field(default_factory=dict)
    """The JWK Sets read so far, by ``jwksUrl`` (each read once a run)."""


class Probe:
    """Records the checks of one target."""

    def __init__(self, run: Run, target: str) -> None:
        self.run = run
        self.target = target
        self._stopped = ""
        self._stopped_evidence: list[Exchange] = []

    def record(
        self, check_id: str, outcome: Outcome, detail: str = "", exchanges: Iterable[Exchange] = ()
    ) -> CheckResult:
        """Add one result to the report."""
        result = CheckResult(
            check_spec(check_id), self.target, outcome, detail, [e.as_dict() for e in exchanges]
        )
        self.run.report.results.append(result)
        return result

    def recorded(self, check_id: str) -> CheckResult | None:
        """This target's result of ``check_id``, if recorded."""
        return self.run.report.result(check_id, self.target)

    @asynccontextmanager
    async def check(self, check_id: str) -> AsyncIterator[list[Exchange]]:
        """Run one check; the yielded list collects exchanges shown when it fails for another reason."""
        shown: list[Exchange] = []
        try:
            yield shown
        except CheckFailed as failure:
            self._stop(check_id, str(failure), failure.exchanges or shown)
        except NotApplicable as reason:
            self.record(check_id, Outcome.SKIPPED, str(reason))
        except MerchantFault as fault:
            self._stop(
                check_id,
                f"the merchant's answer is unusable: {fault}",
                [fault.exchange] if fault.exchange else shown,
            )
        except UnsafeTerms as refusal:
            self._stop(check_id, str(refusal), shown)
        except ChainError as error:
            self._stop(check_id, f"reading the chain failed: {error}", shown)
        except Exception as error:  # noqa: BLE001 - nothing a merchant sends may crash the kit
            self._stop(check_id, f"the kit could not use the answer: {failure_reason(error)}", shown)
        else:
            self.record(check_id, Outcome.PASSED)

    def _stop(self, check_id: str, detail: str, exchanges: list[Exchange]) -> None:
        self.record(check_id, Outcome.FAILED, detail, exchanges)
        self._stopped = f"{check_id} failed: {detail}"
        self._stopped_evidence = exchanges

    def skip_rest(self, check_id: str, rest: Iterable[str]) -> bool:
        """Whether ``check_id`` was skipped; if so, ``rest`` (the checks that build on it) are skipped too,
        for the same reason."""
        result = self.recorded(check_id)
        if result is None or result.outcome is not Outcome.SKIPPED:
            return False
        for later in rest:
            self.record(later, Outcome.SKIPPED, result.detail)
        return True

    @property
    def failed(self) -> bool:
        """Whether a check of this probe failed (later steps of a scenario then do not run)."""
        return bool(self._stopped)

    @asynccontextmanager
    async def scenario(self, check_ids: Iterable[str]) -> AsyncIterator[Probe]:
        """A sequence of dependent checks; those not recorded at the end are failed as not reached."""
        probe = Probe(self.run, self.target)
        try:
            yield probe
        except Exception as stop:  # noqa: BLE001 - nothing a merchant sends may crash the kit
            probe._stopped = probe._stopped or f"stopped: {type(stop).__name__}: {stop}"
            exchange = getattr(stop, "exchange", None)
            probe._stopped_evidence = probe._stopped_evidence or ([exchange] if exchange else [])
        for check_id in check_ids:
            if probe.recorded(check_id) is None:
                reason = probe._stopped or "the scenario ended before this step"
                probe.record(check_id, Outcome.FAILED, f"not reached: {reason}", probe._stopped_evidence)
