"""The facilitator's Prometheus metrics, on a registry of the app's own.

Counted where they happen: verifications and settlements by result (`valid`, `success`, `pending`, or the
x402 reason), and their latency. Read per scrape: the unfinished claims, the chain head's lag, and each
relayer's balance and next nonce (`relayer` label: its address, public by nature), and each pool key's
lease, usability and transactions in flight in this process; what reverted settlements cost each key
(this process's total, and the budget window's from the database) and the refusals they caused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric

from a2a_x402.observability import LATENCY_BUCKETS_S, Reading, gauge

from ._probe import ChainStatus
from ._service import Facilitator
from .wire import Reason, SettleResponse, VerifyResponse

__all__ = ["FacilitatorMetrics", "chain_gauges", "facilitator_readings", "pool_gauges", "revert_gauges"]


class FacilitatorMetrics:
    """What the facilitator's HTTP service counts and times, registered in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.verify_seconds = Histogram(
            "x402_facilitator_verify_seconds",
            "time to answer a /verify",
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.settle_seconds = Histogram(
            "x402_facilitator_settle_seconds",
            "time to answer a /settle",
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self._verifications = Counter(
            "x402_facilitator_verifications",
            "verifications answered, by result",
            ["result"],
            registry=registry,
        )
        self._settlements = Counter(
            "x402_facilitator_settlements", "settlements answered, by result", ["result"], registry=registry
        )
        self._door_refusals = Counter(
            "x402_facilitator_door_refusals",
            "requests refused at the door (/verify, /settle, /settle/status), by reason",
            ["reason"],
            registry=registry,
        )

    def door_refused(self, reason: str) -> None:
        """Count a refusal at the door: `no_key`, `bad_header`, `unknown_key` (wrong or revoked),
        `throttled` (a wrong key from a client with too many lately), or a key's rule: `pay_to`, `asset`,
        `min_amount`, `rate`."""
        self._door_refusals.labels(reason).inc()

    def verified(self, answer: VerifyResponse) -> None:
        """Count a verification answer: `valid` or the reason it is not."""
        self._verifications.labels("valid" if answer.is_valid else str(answer.invalid_reason)).inc()

    def settled(self, answer: SettleResponse) -> None:
        """Count a settle answer: `success`, `pending` (answered with its hash) or its reason."""
        if answer.success:
            result = "success"
        elif answer.error_reason == Reason.SETTLEMENT_PENDING:
            result = "pending"
        else:
            result = str(answer.error_reason)
        self._settlements.labels(result).inc()


def chain_gauges(status: ChainStatus) -> list[Metric]:
    """The chain head's block and lag, and each relayer's balance and next nonce."""
    return [
        gauge("x402_chain_head_block", "the node's latest block number", [((), status.head_block)]),
        gauge(
            "x402_chain_head_lag_seconds",
            "wall clock minus the latest block's timestamp",
            [((), status.head_lag_s)],
        ),
        gauge(
            "x402_relayer_balance_wei",
            "the relayer's balance for gas",
            [((r.address,), r.balance_wei) for r in status.relayers],
            labels=("relayer",),
        ),
        gauge(
            "x402_relayer_next_nonce",
            "the nonce the relayer's next transaction takes (the node's pending count)",
            [((r.address,), r.next_nonce) for r in status.relayers],
            labels=("relayer",),
        ),
    ]


def facilitator_readings(facilitator: Callable[[], Facilitator]) -> list[Reading]:
    """Scrape-time gauges of `facilitator()`: chain, relayers, unfinished claims."""

    async def chain() -> Iterable[Metric]:
        return chain_gauges(await facilitator().chain_status())

    async def claims() -> Iterable[Metric]:
        counts = await facilitator().unfinished_claims()
        return [
            gauge(
                "x402_facilitator_settlements_pending",
                "claims not final yet: claimed (nothing sent) or broadcast (sent, awaiting depth)",
                [((state.value,), n) for state, n in counts.items()],
                labels=("state",),
            )
        ]

    async def relayers() -> Iterable[Metric]:
        return pool_gauges(facilitator())

    return [Reading("chain", chain), Reading("claims", claims), Reading("relayers", relayers)]


def pool_gauges(facilitator: Facilitator) -> list[Metric]:
    """Each relayer key of the pool as this process sees it: held (leased here), usable, in flight; and the
    fee-bumped replacements sent."""
    states = facilitator.relayer_states()
    return [
        gauge(
            "x402_relayer_held",
            "1 when this process holds the key's lease",
            [((s.address,), int(s.held)) for s in states],
            labels=("relayer",),
        ),
        gauge(
            "x402_relayer_usable",
            "1 when the key takes new settlements (held, accounted for, funded, not stuck)",
            [((s.address,), int(s.usable)) for s in states],
            labels=("relayer",),
        ),
        gauge(
            "x402_relayer_in_flight",
            "transactions this process sent with the key and has not seen mined",
            [((s.address,), s.in_flight) for s in states],
            labels=("relayer",),
        ),
        gauge(
            "x402_facilitator_fee_replacements",
            "fee-bumped replacements this process has sent",
            [((), facilitator.replacements_sent)],
        ),
        *revert_gauges(facilitator),
    ]


def revert_gauges(facilitator: Facilitator) -> list[Metric]:
    """Gas spent on reverted settlements, by key, and what reverts made this process refuse."""
    guard = facilitator.revert_guard
    window = guard.spent()
    return [
        gauge(
            "x402_relayer_revert_gas_wei",
            "wei of gas this process saw the key spend on settlements that reverted on chain",
            [((address,), guard.revert_gas_wei[address]) for address in facilitator.relayer_addresses],
            labels=("relayer",),
        ),
        gauge(
            "x402_relayer_revert_gas_window_wei",
            "wei the key spent on reverted settlements in the last hour (every replica), as last read",
            [((address,), window.get(address, 0)) for address in facilitator.relayer_addresses],
            labels=("relayer",),
        ),
        gauge(
            "x402_facilitator_revert_refusals",
            "verifications and settles refused because of reverted settlements: a payer or wallet code "
            "cooling off, or the keys' revert budget spent",
            [((why,), guard.refusals[why]) for why in ("payer", "code", "budget")],
            labels=("reason",),
        ),
    ]
