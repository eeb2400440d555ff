"""The merchant's Prometheus metrics, on a registry of the app's own (`build_app` serves it at `/metrics`).

Counted where they happen: payments by tenant and outcome (the payment layer's listener), the decisions on
AP2 mandates by tenant, outcome and `ap2Error` code, the latency of the facilitator's verify and settle as
the payment layer sees them (`TimedFacilitator`), webhook delivery attempts by outcome, and the
differences the reconciler found. Read per scrape: payments in flight,
the reconciler's open differences by kind, settlements booked but not final, each webhook endpoint's
backlog, and, in every facilitator mode, the chain head's lag; with the in-process facilitator also its
relayers and unfinished claims.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import fields

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.facilitator import (
    ChainStatus,
    Facilitator,
    FacilitatorClient,
    chain_gauges,
    facilitator_readings,
)
from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentRequirements,
    Permit2PaymentPayload,
    SettleResponse,
    VerifyResponse,
)
from a2a_x402.observability import LATENCY_BUCKETS_S, Reading, ScrapedGauges, gauge

from .differences import KNOWN_KINDS, DifferenceStore
from .ledger import Ledger
from .payments import MANDATE_CODES, OfferStore, PaymentOutcome, PurgeReport
from .reconciler import RECONCILE_STAGES, ReconcileReport
from .webhooks import delivery_backlog

__all__ = ["MerchantMetrics", "TimedFacilitator"]

# What a reconcile pass found that the records did not already say; `finalized` is the normal course.
_MANDATE_OUTCOMES = ("accepted", "refused")
_DIFFERENCES = ("claims_moved", "turns_finished", "told_late", "booked_late", "booked_from_chain", "reversed")


class MerchantMetrics:
    """The merchant's counters and histograms, and the scrape-time gauges, in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._payments = Counter(
            "x402_merchant_payments",
            "payments taken, by tenant and outcome",
            ["tenant", "outcome"],
            registry=registry,
        )
        self.verify_seconds = Histogram(
            "x402_merchant_verify_seconds",
            "time of a facilitator verify",
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.settle_seconds = Histogram(
            "x402_merchant_settle_seconds",
            "time of a facilitator settle call (a pending settlement is asked again)",
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self._deliveries = Counter(
            "x402_merchant_webhook_deliveries",
            "webhook delivery attempts, by outcome",
            ["outcome"],
            registry=registry,
        )
        self._differences = Counter(
            "x402_merchant_reconciler_differences",
            "differences between the records and the chain the reconciler found and resolved, by kind "
            "(kind=unresolved: those it could not)",
            ["kind"],
            registry=registry,
        )
        self._reconcile_failures = Counter(
            "x402_merchant_reconciler_failures",
            "items (or stages) a reconcile pass could not finish and left to the next pass, by stage "
            "(claims, turns, tell, book, scan, finalize)",
            ["stage"],
            registry=registry,
        )
        for stage in RECONCILE_STAGES:
            self._reconcile_failures.labels(stage)
        self._purged = Counter(
            "x402_merchant_unpaid_purged",
            "unpaid tasks and their offers deleted past their retention, by what",
            ["what"],
            registry=registry,
        )
        self._mandates = Counter(
            "x402_ap2_mandates",
            "decisions on the AP2 mandates of payments, by tenant, outcome (accepted, refused) and ap2Error "
            "code (empty when accepted)",
            ["tenant", "outcome", "code"],
            registry=registry,
        )
        for what in ("tasks", "offers"):
            self._purged.labels(what)
        for outcome in ("delivered", "retry", "failed", "disabled"):
            self._deliveries.labels(outcome)
        for kind in (*_DIFFERENCES, "unresolved"):
            self._differences.labels(kind)

    def payment(self, tenant: str, outcome: PaymentOutcome) -> None:
        """Count one payment's outcome (the payment layer's `OutcomeListener`)."""
        self._payments.labels(tenant, outcome.value).inc()

    def mandates(self, tenant: str, outcome: str, code: str) -> None:
        """Count one decision on a payment's AP2 mandates (`payments.KeptMandates`' listener): `outcome`
        accepted (`code` "") or refused with its `ap2Error` code; any other value is counted as "other",
        so that the labels stay few."""
        outcome = outcome if outcome in _MANDATE_OUTCOMES else "other"
        code = code if code == "" or code in MANDATE_CODES else "other"
        self._mandates.labels(tenant, outcome, code).inc()

    def delivery(self, outcome: str) -> None:
        """Count one webhook delivery attempt's outcome."""
        self._deliveries.labels(outcome).inc()

    def reconciled(self, report: ReconcileReport) -> None:
        """Count what one reconcile pass found, and the items it could not finish."""
        for name in (f.name for f in fields(report) if f.name in _DIFFERENCES):
            self._differences.labels(name).inc(getattr(report, name))
        self._differences.labels("unresolved").inc(len(report.unresolved))
        for stage, count in report.failed.items():
            self._reconcile_failures.labels(stage).inc(count)

    def purged(self, report: PurgeReport) -> None:
        """Count what one purge of unpaid tasks removed."""
        self._purged.labels("tasks").inc(report.tasks)
        self._purged.labels("offers").inc(report.offers)

    def scrape(
        self,
        *,
        engine: AsyncEngine,
        offers: OfferStore,
        ledger: Ledger,
        facilitator: FacilitatorClient,
        chain_status: Callable[[], Awaitable[ChainStatus]],
    ) -> ScrapedGauges:
        """Register and return the scrape-time gauges of this merchant."""

        async def payments() -> Iterable[Metric]:
            counts = await offers.unfinished_counts()
            unfinalized = await ledger.unfinalized_count()
            return [
                gauge(
                    "x402_merchant_settlements_pending",
                    "payments taken and not settled yet: working (the paid work runs) or settling",
                    [((state.value,), n) for state, n in counts.items()],
                    labels=("state",),
                ),
                gauge(
                    "x402_merchant_settlements_unfinalized",
                    "settlements booked and not yet final (at the confirmation depth) or reversed",
                    [((), unfinalized)],
                ),
            ]

        async def webhooks() -> Iterable[Metric]:
            backlog = await delivery_backlog(engine)
            return [
                gauge(
                    "x402_merchant_webhook_backlog",
                    "webhook deliveries pending (due or waiting for a retry), by endpoint id",
                    [((endpoint,), n) for endpoint, n in sorted(backlog.items())],
                    labels=("endpoint",),
                )
            ]

        async def differences() -> Iterable[Metric]:
            counts = dict.fromkeys(KNOWN_KINDS, 0) | await DifferenceStore(engine).open_counts()
            return [
                gauge(
                    "x402_merchant_differences_open",
                    "differences between the records and the chain still open (not resolved by the chain "
                    "nor acknowledged or booked by an operator), by kind",
                    [((kind,), n) for kind, n in sorted(counts.items())],
                    labels=("kind",),
                )
            ]

        readings = [
            Reading("payments", payments),
            Reading("webhooks", webhooks),
            Reading("differences", differences),
        ]
        if isinstance(facilitator, Facilitator):
            readings += facilitator_readings(lambda: facilitator)
        else:

            async def chain() -> Iterable[Metric]:
                return chain_gauges(await chain_status())

            readings.append(Reading("chain", chain))
        scraped = ScrapedGauges(readings)
        self.registry.register(scraped)
        return scraped


class TimedFacilitator:
    """A `FacilitatorClient` that times `verify` and `settle` into `metrics`, delegating to `inner`."""

    def __init__(self, inner: FacilitatorClient, metrics: MerchantMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def verify(
        self, payload: PaymentPayload | Permit2PaymentPayload, requirements: PaymentRequirements
    ) -> VerifyResponse:
        """The inner verify, timed."""
        started = time.perf_counter()
        try:
            return await self._inner.verify(payload, requirements)
        finally:
            self._metrics.verify_seconds.observe(time.perf_counter() - started)

    async def settle(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        *,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
        presented_at: int | None = None,
    ) -> SettleResponse:
        """The inner settle, timed."""
        started = time.perf_counter()
        try:
            return await self._inner.settle(
                payload,
                requirements,
                idempotency_key=idempotency_key,
                timeout_s=timeout_s,
                presented_at=presented_at,
            )
        finally:
            self._metrics.settle_seconds.observe(time.perf_counter() - started)

    async def settlement_status(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        *,
        timeout_s: float = 0.0,
    ) -> SettleResponse | None:
        """The inner settlement status (not timed: it is the reconciler's, not a paid turn's)."""
        return await self._inner.settlement_status(payload, requirements, timeout_s=timeout_s)

    async def aclose(self) -> None:
        """Nothing: the inner client belongs to whoever made it."""
