"""`GET /metrics` in the Prometheus text format, with gauges read from the database and the chain per scrape.

Each app owns a `CollectorRegistry` (never the process-global default one), so several apps in one
process never share or collide on a metric. Counters and histograms are updated where things happen.
Gauges that need a database or chain read are `Reading`s: coroutines run concurrently right before the
registry is rendered, each within a deadline, so a scrape never blocks the event loop and a dead node
costs a scrape at most that deadline. A reading that fails or times out contributes no samples to that
scrape (never a stale value), and `x402_scrape_reading_ok{reading}` says which ones failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["METRICS_PATH", "LATENCY_BUCKETS_S", "Reading", "ScrapedGauges", "gauge", "metrics_route"]

logger = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
"""Buckets of the verify and settle histograms: a verify takes milliseconds, a settle up to its deadline."""


@dataclass(frozen=True, slots=True)
class Reading:
    """A named source of gauges read at scrape time: `read` returns their metric families."""

    name: str
    read: Callable[[], Awaitable[Iterable[Metric]]]


def gauge(
    name: str, documentation: str, samples: Iterable[tuple[Sequence[str], float]], labels: Sequence[str] = ()
) -> Metric:
    """A gauge family with one sample per (label values, value) of `samples`."""
    family = GaugeMetricFamily(name, documentation, labels=list(labels))
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


class ScrapedGauges(Collector):
    """The gauges of `readings`, as read by the latest `refresh` (call it right before rendering)."""

    def __init__(self, readings: Sequence[Reading], *, timeout_s: float = 3.0) -> None:
        self._readings = list(readings)
        self._timeout_s = timeout_s
        self._families: list[Metric] = []
        self._ok: dict[str, bool] = {}

    async def refresh(self) -> None:
        """Run every reading concurrently, each within the deadline; keep what they returned."""
        results = await asyncio.gather(*(self._read(reading) for reading in self._readings))
        self._families = [family for families in results if families is not None for family in families]
        self._ok = {
            reading.name: families is not None
            for reading, families in zip(self._readings, results, strict=True)
        }

    async def _read(self, reading: Reading) -> list[Metric] | None:
        try:
            return list(await asyncio.wait_for(reading.read(), self._timeout_s))
        except Exception as exc:  # noqa: BLE001 - a failed reading leaves its gauges out of this scrape
            logger.debug("metrics reading %s failed: %s: %s", reading.name, type(exc).__name__, exc)
            return None

    def collect(self) -> Iterable[Metric]:
        """The families of the latest refresh, and which readings succeeded."""
        yield from self._families
        yield gauge(
            "x402_scrape_reading_ok",
            "1 if the reading of these gauges succeeded at this scrape, 0 if it failed or timed out",
            [((name,), 1.0 if ok else 0.0) for name, ok in self._ok.items()],
            labels=("reading",),
        )


def metrics_route(registry: CollectorRegistry, scraped: ScrapedGauges | None = None) -> Route:
    """`GET /metrics`: `scraped` refreshed, then `registry` rendered in the Prometheus text format."""

    async def metrics(_request: Request) -> Response:
        if scraped is not None:
            await scraped.refresh()
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return Route(METRICS_PATH, metrics, methods=["GET"])
