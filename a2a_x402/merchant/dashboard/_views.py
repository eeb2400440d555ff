"""What a tenant's dashboard pages show, read through the owners' query APIs and reduced to display values.

Every read names the tenant: the ledger's, the outbox's and the endpoints' queries are filtered by it, and
the stored differences are those about the tenant's bookings and payee, and those about the chain itself
(open until resolved, whatever the reconciler's last pass saw). The view objects carry
only what a page shows (an endpoint's URL and state, never its signing secrets), with amounts as `Money`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence, Sized
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from functools import partial

from a2a_x402.merchant.callers import CallerKeys
from a2a_x402.merchant.differences import DifferenceStore
from a2a_x402.merchant.ledger import EntryStatus, LedgerReader, SettlementRecord
from a2a_x402.merchant.payments import OfferReader, Purchase
from a2a_x402.merchant.reconciler import Reconciler
from a2a_x402.merchant.webhooks import Outbox, WebhookEndpoints

from ._activity import PayerView, TotalView, UnpaidPage, UnpaidView, payer_views, totals, unpaid_views
from ._chart import COMPACT_WIDTH, RevenueChart, revenue_charts
from ._deliveries import DeliveryView, EndpointView, delivery_views
from ._differences import DifferenceView, difference_views
from ._filters import SettlementFilter, unpaid_cursor
from ._format import AssetInfo, Money, format_time, money

__all__ = [
    "BalanceView",
    "CallerView",
    "DashboardData",
    "Overview",
    "SettlementDetail",
    "SettlementPage",
    "SettlementView",
]

CHART_DAYS = 30
_RECENT = 20
PAGE_SIZE = 25
_PAYERS = 50
_LISTED = 50
_DELIVERIES = 50
_ATTEMPTS = 500


@dataclass(frozen=True, slots=True)
class BalanceView:
    """A revenue account: network, asset, balance and its credits and debits."""

    network: str
    asset: str
    asset_name: str
    balance: Money
    credits: Money
    debits: Money


@dataclass(frozen=True, slots=True)
class SettlementView:
    """One settlement as a table row shows it."""

    id: str
    task_id: str
    state: str
    amount: Money
    payer: str
    pay_to: str
    network: str
    tx_hash: str
    block_number: int
    booked_at: str
    effective_at: str
    finality: str
    reversal_id: str | None
    reversal_reason: str | None
    skill: str = ""
    description: str = ""
    # A payment made with AP2 mandates: their references (hashes, never the mandates); else None.
    ap2_checkout_hash: str | None = None
    ap2_payment_ref: str | None = None
    ap2_open_mandate: str | None = None


@dataclass(frozen=True, slots=True)
class Overview:
    """Everything on a tenant's dashboard page."""

    balances: tuple[BalanceView, ...]
    charts: tuple[RevenueChart, ...]
    chart_days: int
    recent: tuple[SettlementView, ...]
    unfinalized: tuple[SettlementView, ...]
    reversed: tuple[SettlementView, ...]
    endpoints: tuple[EndpointView, ...]
    differences: tuple[DifferenceView, ...]
    reconciled_at: str | None
    callers: tuple[CallerView, ...] = ()
    compact_charts: tuple[RevenueChart, ...] = ()
    totals: tuple[TotalView, ...] = ()
    payers: tuple[PayerView, ...] = ()
    unpaid: tuple[UnpaidView, ...] = ()
    unpaid_known: bool = False
    # How many each capped list has in all (a list shorter than its cap has them all).
    unpaid_count: int = 0
    payer_count: int = 0
    unfinalized_count: int = 0
    reversed_count: int = 0


@dataclass(frozen=True, slots=True)
class SettlementPage:
    """A page of the settlements list: its rows (newest first) under `filter`, and the next page's cursor
    (None on the last page)."""

    rows: tuple[SettlementView, ...]
    filter: SettlementFilter
    next_before: int | None


@dataclass(frozen=True, slots=True)
class CallerView:
    """An API key issued to one of the tenant's clients (never the key): its name and when it was used."""

    name: str
    created: str
    last_used: str
    revoked: str | None


@dataclass(frozen=True, slots=True)
class SettlementDetail:
    """A settlement's page: the settlement and the delivery of each event announcing what befell it."""

    settlement: SettlementView
    confirmations: int | None
    finalized_at: str
    deliveries: tuple[DeliveryView, ...]
    events: tuple[tuple[str, str, int], ...]
    endpoints_configured: bool = True


class DashboardData:
    """Reads a tenant's dashboard from the ledger, the outbox, the endpoints, the stored differences and
    the reconciler (only when its last pass ended)."""

    def __init__(
        self,
        *,
        ledger: LedgerReader,
        outbox: Outbox,
        endpoints: WebhookEndpoints,
        reconciler: Reconciler | None,
        assets: Mapping[str, AssetInfo],
        confirmations: int,
        callers: CallerKeys | None = None,
        offers: OfferReader | None = None,
        differences: DifferenceStore | None = None,
    ) -> None:
        self._ledger = ledger
        self._outbox = outbox
        self._endpoints = endpoints
        self._reconciler = reconciler
        self._assets = assets
        self._confirmations = confirmations
        self._callers = callers
        self._offers = offers
        self._differences = differences

    async def overview(self, tenant: str, pay_to: str, *, now: datetime | None = None) -> Overview:
        """The dashboard of `tenant`, whose payee is `pay_to`, as of `now` (UTC)."""
        today = (now or datetime.now(UTC)).astimezone(UTC).date()
        since = datetime.combine(today - timedelta(days=CHART_DAYS - 1), time(), UTC)
        daily = await self._ledger.daily_revenue(tenant, since, since + timedelta(days=CHART_DAYS))
        reconciled_at: str | None = None
        if self._reconciler is not None and self._reconciler.last_pass_at is not None:
            reconciled_at = format_time(self._reconciler.last_pass_at)
        unfinalized = await self._settlements(tenant, EntryStatus.SETTLED, _LISTED)
        reversed_ = await self._settlements(tenant, EntryStatus.REVERSED, _LISTED)
        payers = tuple(payer_views(await self._ledger.payers(tenant, limit=_PAYERS), self._assets))
        unpaid = await self.unpaid_page(tenant)
        count = partial(self._ledger.settlement_count, tenant)
        return Overview(
            balances=tuple(
                BalanceView(
                    network=balance.network,
                    asset=balance.asset,
                    asset_name=self._asset_name(balance.asset),
                    balance=money(balance.balance, balance.asset, self._assets),
                    credits=money(balance.credits, balance.asset, self._assets),
                    debits=money(balance.debits, balance.asset, self._assets),
                )
                for balance in await self._ledger.balance(tenant)
            ),
            charts=tuple(revenue_charts(daily, last_day=today, span_days=CHART_DAYS, assets=self._assets)),
            compact_charts=tuple(
                revenue_charts(
                    daily, last_day=today, span_days=CHART_DAYS, assets=self._assets, width=COMPACT_WIDTH
                )
            ),
            chart_days=CHART_DAYS,
            recent=await self._settlements(tenant, None, _RECENT),
            unfinalized=unfinalized,
            unfinalized_count=await _counted(
                unfinalized, _LISTED, partial(count, status=EntryStatus.SETTLED)
            ),
            reversed=reversed_,
            reversed_count=await _counted(reversed_, _LISTED, partial(count, status=EntryStatus.REVERSED)),
            endpoints=await self._endpoint_views(tenant),
            differences=await self._difference_views(tenant, pay_to),
            reconciled_at=reconciled_at,
            callers=await self._caller_views(tenant),
            totals=tuple(totals(daily, today=today, assets=self._assets)),
            payers=payers,
            payer_count=await _counted(payers, _PAYERS, partial(self._ledger.payer_count, tenant)),
            unpaid=unpaid.rows,
            unpaid_known=unpaid.known,
            unpaid_count=await _counted(
                unpaid.rows, PAGE_SIZE, partial(self._offers.unpaid_count, tenant) if self._offers else None
            ),
        )

    async def unpaid_page(
        self, tenant: str, after: tuple[datetime, str] | None = None, *, size: int = PAGE_SIZE
    ) -> UnpaidPage:
        """One page of `tenant`'s refused and failed payments after the cursor `after`, most recent first,
        `size` rows at most."""
        if self._offers is None:
            return UnpaidPage(rows=(), before=None, next_before=None, known=False)
        attempts = await self._offers.unpaid(tenant, limit=size + 1, after=after)
        shown = attempts[:size]
        last = shown[-1] if shown and len(attempts) > size else None
        return UnpaidPage(
            rows=tuple(unpaid_views(shown, self._assets)),
            before=None if after is None else unpaid_cursor(*after),
            next_before=None if last is None else unpaid_cursor(last.at, last.task_id),
        )

    async def settlement_page(
        self, tenant: str, wanted: SettlementFilter, *, size: int = PAGE_SIZE
    ) -> SettlementPage:
        """One page of `tenant`'s settlements under `wanted`, newest first, `size` rows at most."""
        records = await self._ledger.settlements(
            tenant, limit=size + 1, before=wanted.before, since=wanted.since_at, until=wanted.until_at
        )
        shown = records[:size]
        rows = await self._settlement_views(tenant, shown)
        more = len(records) > size
        return SettlementPage(
            rows=rows, filter=wanted, next_before=shown[-1].entry.sequence if more and shown else None
        )

    async def _difference_views(self, tenant: str, pay_to: str) -> tuple[DifferenceView, ...]:
        if self._differences is None:
            return ()
        scope = (tenant, pay_to)
        return difference_views(
            await self._differences.listed(tenant_or_payee=scope, chain_wide=True, limit=_LISTED)
        )

    async def _caller_views(self, tenant: str) -> tuple[CallerView, ...]:
        if self._callers is None:
            return ()
        return tuple(
            CallerView(
                name=key.name,
                created=format_time(key.created_at),
                last_used=format_time(key.last_used_at) if key.last_used_at is not None else "never",
                revoked=format_time(key.revoked_at) if key.revoked_at is not None else None,
            )
            for key in await self._callers.list(tenant)
        )

    async def settlement(self, tenant: str, entry_id: str) -> SettlementDetail:
        """The page of `tenant`'s settlement `entry_id`.

        Raises:
            EntryNotFoundError: the tenant has no such settlement.
        """
        record = await self._ledger.settlement(tenant, entry_id)
        sequences = [record.entry.sequence]
        if record.finalization is not None:
            sequences.append(record.finalization.sequence)
        if record.reversal is not None:
            sequences.append(record.reversal.sequence)
        events = await self._outbox.events_at(tenant, sequences)
        event_ids = [event.id for event in events]
        deliveries = await self._outbox.deliveries(tenant, limit=_DELIVERIES, event_ids=event_ids)
        log = await self._outbox.delivery_log(tenant, limit=_ATTEMPTS, event_ids=event_ids)
        final = record.finalization
        [view] = await self._settlement_views(tenant, [record])
        return SettlementDetail(
            settlement=view,
            confirmations=None if final is None else final.confirmations,
            finalized_at=format_time(None if final is None else final.finalized_at),
            deliveries=delivery_views(deliveries, log),
            events=tuple((event.id, event.type, event.sequence) for event in events),
            endpoints_configured=bool(deliveries) or bool(await self._endpoints.list(tenant)),
        )

    async def _settlements(
        self, tenant: str, status: EntryStatus | None, limit: int
    ) -> tuple[SettlementView, ...]:
        records = await self._ledger.settlements(tenant, status=status, limit=limit)
        return await self._settlement_views(tenant, records)

    async def _settlement_views(
        self, tenant: str, records: Sequence[SettlementRecord]
    ) -> tuple[SettlementView, ...]:
        bought: dict[str, Purchase] = {}
        if self._offers is not None and records:
            bought = await self._offers.purchases(tenant, (record.entry.task_id for record in records))
        return tuple(self._settlement_view(record, bought.get(record.entry.task_id)) for record in records)

    async def _endpoint_views(self, tenant: str) -> tuple[EndpointView, ...]:
        deliveries = await self._outbox.deliveries(tenant, limit=_DELIVERIES)
        log = await self._outbox.delivery_log(
            tenant, limit=_ATTEMPTS, event_ids=[delivery.event_id for delivery in deliveries]
        )
        views = delivery_views(deliveries, log)
        return tuple(
            EndpointView(
                id=endpoint.id,
                url=endpoint.url,
                status=endpoint.status,
                disabled_reason=endpoint.disabled_reason,
                event_types=endpoint.event_types,
                deliveries=tuple(view for view in views if view.endpoint_id == endpoint.id),
            )
            for endpoint in await self._endpoints.list(tenant)
        )

    def _settlement_view(self, record: SettlementRecord, bought: Purchase | None = None) -> SettlementView:
        entry = record.entry
        return SettlementView(
            id=entry.id,
            task_id=entry.task_id,
            state=entry.status.value,
            amount=money(entry.amount, entry.asset, self._assets),
            payer=entry.payer,
            pay_to=entry.pay_to,
            network=entry.network,
            tx_hash=entry.tx_hash,
            block_number=entry.block_number,
            booked_at=format_time(entry.booked_at),
            effective_at=format_time(entry.effective_at),
            finality=self._finality(record),
            reversal_id=None if record.reversal is None else record.reversal.id,
            reversal_reason=None if record.reversal is None else record.reversal.reason,
            skill="" if bought is None else bought.skill,
            description="" if bought is None else bought.description,
            ap2_checkout_hash=entry.ap2_checkout_hash,
            ap2_payment_ref=entry.ap2_payment_ref,
            ap2_open_mandate=entry.ap2_open_mandate,
        )

    def _finality(self, record: SettlementRecord) -> str:
        if record.reversal is not None:
            return f"reversed {format_time(record.reversal.booked_at)}"
        if record.finalization is not None:
            # The recorded count is how deep the transaction was when the reconciler looked, not what
            # finality needs: say when it was marked final, and by what rule.
            final = record.finalization
            depth = _confirmations(self._confirmations)
            when = format_time(final.finalized_at)
            return f"final since {when}: marked by the reconciler ({depth} required)"
        # The dashboard does not read the chain's head, so it cannot say how deep the transaction is: only
        # that the reconciler's check is still to come (it finalizes at the configured depth).
        depth = _confirmations(self._confirmations)
        return f"not final yet: awaiting the reconciler's next check (final at {depth})"

    def _asset_name(self, asset: str) -> str:
        info = self._assets.get(asset)
        return asset if info is None else info.name


async def _counted(shown: Sized, cap: int, count: Callable[[], Awaitable[int]] | None) -> int:
    """How many rows a list capped at `cap` has in all: counted (`count()`) only when `shown` is full."""
    if count is None or len(shown) < cap:
        return len(shown)
    return await count()


def _confirmations(count: int) -> str:
    return f"{count} confirmation" + ("" if count == 1 else "s")
