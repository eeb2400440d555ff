"""Unpaid work, bounded: per caller, how many tasks may await payment and how fast they may be created; and
the purge of tasks left unpaid.

A priced task costs a stored task and an offer row before anyone pays, so a caller is limited to
`max_awaiting` tasks awaiting payment at once (offers still `offered` and within their terms'
`maxTimeoutSeconds`: an expired offer no longer counts) and to `max_per_minute` started in the last minute
and left unpaid (offered, rejected or failed: a caller who pays is never slowed down; one who rejects each
offer to free its place is). The
check and the place it takes are atomic (`UnpaidWork.admit`): N concurrent requests of one caller with
room for L are admitted exactly L times, on SQLite and PostgreSQL alike. The
caller is the authenticated principal (`user:<name>`) when the request has one, else the client's network
(`address:<IPv4 address>`, or `address:<IPv6 /64>`, since whoever has one IPv6 address usually has its
whole /64): the edge puts the address into the call context (`CLIENT_ADDRESS_KEY`). The operator sets
each tenant's limits and retention (its tenants-file table, else the settings': `UnpaidRules`), and the
tenant may tighten them through its billing API (`set_own`; `_unpaid_limits`), from the next request on.

The purge deletes, in one transaction per batch, the tasks whose offer has stayed `offered` or `rejected`
longer than the tenant's retention (never less than the terms' timeout), with their offers and callers;
the offer's state is checked again by the DELETE itself, so an offer that became `working`, `settling` or
`paid` meanwhile (and so one that is booked) is never touched. What it removed is counted (`PurgeReport`).
Who asked for an offer is forgotten after the retention too, whatever became of the offer. A payment
presented with AP2 mandates but never taken has its mandates' use released in the purge's transaction
(`MandateUsageStore.release_tasks_in`): it can settle no more, and would otherwise count against the
user's budget for good.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from a2a.server.context import ServerCallContext
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.tenants import TenantRegistry
from a2a_x402.observability import client_network
from a2a_x402.storage import UtcDateTime, write, write_transaction

from ._offer_table import OfferState, offers_table
from ._unpaid_limits import OwnLimitStore, UnpaidRules, applied_rules, parse_own_limits, rules_json

if TYPE_CHECKING:
    from ..ap2 import MandateUsageStore

__all__ = [
    "CLIENT_ADDRESS_KEY",
    "PurgeReport",
    "RESERVATION_KEY",
    "UnpaidLimitError",
    "UnpaidRules",
    "UnpaidWork",
    "caller_of",
    "offer_callers_table",
]

logger = logging.getLogger(__name__)

CLIENT_ADDRESS_KEY = "x402_client_address"
"""The `ServerCallContext.state` key of the client's address, set by the edge for every binding."""
RESERVATION_KEY = "x402_unpaid_reservation"
"""The `ServerCallContext.state` key of the place `UnpaidWork.admit` took for the request's task."""

_UNPAID = "state IN ('offered', 'rejected')"
_RATE_WINDOW = timedelta(minutes=1)
_BEING_PAID = (OfferState.WORKING, OfferState.SETTLING, OfferState.PAID)
_PURGE_BATCH = 500
_RESERVATION_PREFIX = "admit:"

offer_callers_table = sa.Table(
    "payment_offer_callers",
    offers_table.metadata,
    sa.Column("task_id", sa.String(64), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("caller", sa.String(320), nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Index("ix_payment_offer_callers_caller", "tenant", "caller", "created_at"),
)
# What the purge looks for, with the predicate used verbatim by its query (see `_offer_table`).
sa.Index(
    "ix_payment_offers_unpaid",
    offers_table.c.updated_at,
    postgresql_where=sa.text(_UNPAID),
    sqlite_where=sa.text(_UNPAID),
)


def caller_of(context: ServerCallContext | None) -> str:
    """Who a request counts against: its authenticated principal, else its client's network (an IPv4
    address, or the /64 of an IPv6 one)."""
    if context is None:
        return "address:unknown"
    user = context.user
    if user.is_authenticated:
        return f"user:{user.user_name}"[:320]
    address = context.state.get(CLIENT_ADDRESS_KEY)
    if not isinstance(address, str) or not address:
        return "address:unknown"
    return f"address:{client_network(address)}"


class UnpaidLimitError(Exception):
    """A caller is over its bounds on unpaid work; the message says which, in one line."""


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What one purge removed."""

    tasks: int = 0
    offers: int = 0


def _now() -> datetime:
    return datetime.now(UTC)


def _verdict(rules: UnpaidRules, waiting: int, created: int) -> str | None:
    """Why a caller with `waiting` tasks awaiting payment and `created` unpaid in the last minute may not
    start another under `rules`, or None."""
    if waiting >= rules.max_awaiting:
        return (
            f"you have {waiting} tasks awaiting payment, the most allowed: pay or reject one "
            "before starting another"
        )
    if created >= rules.max_per_minute:
        return f"you left {created} priced tasks unpaid within a minute, the most allowed: try again later"
    return None


class UnpaidWork:
    """Admits new priced tasks per caller, records whose they are, and purges unpaid ones (see the module).

    Args:
        engine: the merchant's database (tasks, offers, the tenants' own limits).
        tenants: the tenants, whose own limits (`max_unpaid_tasks`, `max_unpaid_per_minute`,
            `unpaid_retention_s`) override `defaults`: together, the ceiling of each tenant's own.
        defaults: the settings' limits.
        offer_timeout_s: the terms' `maxTimeoutSeconds`: an offer older than this has expired.
        usage: the AP2 mandates' usage record, whose uses the purge releases for the tasks it deletes.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        tenants: TenantRegistry,
        defaults: UnpaidRules,
        offer_timeout_s: float,
        usage: MandateUsageStore | None = None,
    ) -> None:
        self._engine = engine
        self._usage = usage
        self._tenants = tenants
        self._defaults = defaults
        self._own = OwnLimitStore(engine)
        self._offer_timeout = timedelta(seconds=offer_timeout_s)

    def ceiling(self, tenant_id: str) -> UnpaidRules:
        """The operator's bounds for `tenant_id`: its tenants-file entry's where it sets them, the settings'
        else; the tenant may only tighten them (`rules`)."""
        tenant = self._tenants.get(tenant_id)
        own: dict[str, Any] = {}
        if tenant is not None:
            own = {
                key: value
                for key, value in (
                    ("max_awaiting", tenant.max_unpaid_tasks),
                    ("max_per_minute", tenant.max_unpaid_per_minute),
                    ("retention_s", tenant.unpaid_retention_s),
                )
                if value is not None
            }
        return dataclasses.replace(self._defaults, **own)

    async def rules(self, tenant_id: str) -> UnpaidRules:
        """The bounds applied to `tenant_id`'s callers: the operator's (`ceiling`), tightened by the
        tenant's own (`set_own`)."""
        return applied_rules(self.ceiling(tenant_id), await self._own.get(tenant_id))

    async def describe(self, tenant_id: str) -> dict[str, object]:
        """`tenant_id`'s bounds on unpaid work as JSON, for the tenant's billing API: those applied
        (`unpaid`), the operator's (`unpaidCeiling`) and the tenant's own (`unpaidOwn`, null where unset)."""
        own = await self._own.get(tenant_id)
        ceiling = self.ceiling(tenant_id)
        timeout = int(self._offer_timeout.total_seconds())
        return {
            "unpaid": {**rules_json(applied_rules(ceiling, own)), "offerTimeoutSeconds": timeout},
            "unpaidCeiling": rules_json(ceiling),
            "unpaidOwn": rules_json(own),
        }

    async def set_own(self, tenant_id: str, body: bytes) -> dict[str, object]:
        """Store the limits the JSON `body` sets as `tenant_id`'s own, from the next request on; the new
        `describe`.

        Raises:
            InvalidLimitsError: the body is refused, whole (one line why); nothing is changed.
        """
        await self._own.put(tenant_id, parse_own_limits(body, self.ceiling(tenant_id)))
        return await self.describe(tenant_id)

    async def refusal(self, tenant: str, caller: str, *, now: datetime | None = None) -> str | None:
        """Why `caller` may not start another priced task at `tenant` now (one line), or None when it may.

        A read only: `admit` is the check that also takes the place."""
        now = now or _now()
        async with self._engine.connect() as connection:
            waiting, created = (await connection.execute(self._counts(tenant, caller, now))).one()
        return _verdict(await self.rules(tenant), waiting, created)

    async def admit(self, tenant: str, caller: str, *, now: datetime | None = None) -> str:
        """Take a place for a new priced task of `caller` at `tenant`, or refuse it.

        The count and the place taken are one write transaction, so concurrent requests of one caller
        are admitted exactly up to the limits: on SQLite this process's writers take turns
        (`write_transaction`), on PostgreSQL a transaction-scoped advisory lock on (tenant, caller)
        orders them, across processes too. The place is a caller row under a reservation id; `note`
        moves it to the task once its terms are offered. One the request never used (it failed before
        its terms were offered) holds its place for a minute at most, then is forgotten with the others.

        Returns:
            The reservation id, for `note`.

        Raises:
            UnpaidLimitError: the caller has too many tasks awaiting payment, or started too many.
        """
        now = now or _now()
        rules = await self.rules(tenant)  # read before the write transaction: it may go to the database
        reservation = f"{_RESERVATION_PREFIX}{secrets.token_hex(16)}"
        async with write_transaction(self._engine) as connection:
            if self._engine.dialect.name == "postgresql":
                # Held to the end of the transaction: the next admission of this caller counts this one.
                await connection.execute(
                    sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                    {"key": f"x402-unpaid\x1f{tenant}\x1f{caller}"},
                )
            waiting, created = (await connection.execute(self._counts(tenant, caller, now))).one()
            refusal = _verdict(rules, waiting, created)
            if refusal is not None:
                raise UnpaidLimitError(refusal)
            await connection.execute(
                offer_callers_table.insert().values(
                    task_id=reservation, tenant=tenant, caller=caller, created_at=now
                )
            )
        return reservation

    def _counts(self, tenant: str, caller: str, now: datetime) -> sa.Select[int, int]:
        """(awaiting payment, started and left unpaid in the last minute) of `caller`, places taken
        by `admit` and not yet offered included."""
        callers, offers = offer_callers_table, offers_table
        expired = now - self._offer_timeout
        reserved = sa.and_(
            offers.c.task_id.is_(None),
            callers.c.task_id.startswith(_RESERVATION_PREFIX, autoescape=True),
            callers.c.created_at > now - _RATE_WINDOW,
        )
        # One read, over this caller's recent offers only (the index's range): an offer older than the
        # terms' timeout has expired, and the rate looks back a minute.
        return (
            sa.select(
                sa.func.count().filter(
                    sa.or_(
                        sa.and_(offers.c.state == OfferState.OFFERED.value, offers.c.updated_at > expired),
                        reserved,
                    )
                ),
                sa.func.count().filter(
                    callers.c.created_at > now - _RATE_WINDOW,
                    sa.or_(
                        offers.c.state.not_in([state.value for state in _BEING_PAID]),
                        reserved,
                    ),
                ),
            )
            .select_from(callers.outerjoin(offers, offers.c.task_id == callers.c.task_id))
            .where(
                callers.c.tenant == tenant,
                callers.c.caller == caller,
                callers.c.created_at > min(expired, now - _RATE_WINDOW),
            )
        )

    async def release(self, reservation: str) -> None:
        """Give back the place `admit` took for a request refused before its task existed (nothing of a
        refused request stays); a reservation `note` already replaced is gone, and this does nothing."""
        delete = offer_callers_table.delete().where(offer_callers_table.c.task_id == reservation)
        await write(self._engine, lambda connection: connection.execute(delete))

    async def note(self, task_id: str, tenant: str, caller: str, *, reservation: str | None = None) -> None:
        """Record that `caller` asked for the offer of `task_id` (kept with the offer, purged with it),
        in place of the `reservation` `admit` took for it, if any."""
        row = {"task_id": task_id, "tenant": tenant, "caller": caller, "created_at": _now()}
        # Terms offered again for the same task keep the first caller.
        dialect = postgresql if self._engine.dialect.name == "postgresql" else sqlite
        insert = dialect.insert(offer_callers_table).on_conflict_do_nothing()
        release = offer_callers_table.delete().where(offer_callers_table.c.task_id == reservation)

        def operation(connection: sa.Connection) -> None:
            # One transaction: the place is never counted twice, nor left uncounted.
            if reservation is not None:
                connection.execute(release)
            connection.execute(insert, row)

        await write(self._engine, operation)

    async def purge(self, *, now: datetime | None = None) -> PurgeReport:
        """Delete every tenant's tasks unpaid past its retention, with their offers (see the module)."""
        now = now or _now()
        report = PurgeReport()
        for tenant in self._tenants:
            retention = max(timedelta(seconds=(await self.rules(tenant.id)).retention_s), self._offer_timeout)
            while True:
                removed = await self._purge_batch(tenant.id, now - retention)
                report = PurgeReport(report.tasks + removed.tasks, report.offers + removed.offers)
                if removed.offers < _PURGE_BATCH:
                    break
            await self._forget_callers(tenant.id, now - retention)
        return report

    async def _forget_callers(self, tenant: str, cutoff: datetime) -> None:
        """Forget who asked for offers older than the retention (paid ones included): the limits look back
        no further than the terms' timeout, so these rows would only grow."""
        callers = offer_callers_table
        forget = callers.delete().where(callers.c.tenant == tenant, callers.c.created_at < cutoff)

        def operation(connection: sa.Connection) -> None:
            connection.execute(forget)

        await write(self._engine, operation)

    async def _purge_batch(self, tenant: str, cutoff: datetime) -> PurgeReport:
        offers = offers_table
        due = (
            sa.select(offers.c.task_id)
            .where(sa.text(_UNPAID), offers.c.updated_at < cutoff, offers.c.tenant == tenant)
            .limit(_PURGE_BATCH)
        )
        async with write_transaction(self._engine) as connection:
            ids = list((await connection.execute(due)).scalars())
            if not ids:
                return PurgeReport()
            # The state and age are checked again by the DELETE: an offer taken meanwhile stays.
            deleted = list(
                (
                    await connection.execute(
                        offers.delete()
                        .where(offers.c.task_id.in_(ids), sa.text(_UNPAID), offers.c.updated_at < cutoff)
                        .returning(offers.c.task_id)
                    )
                ).scalars()
            )
            if not deleted:
                return PurgeReport()
            tasks = sa.table("tasks", sa.column("id"))
            removed_tasks = await connection.execute(tasks.delete().where(tasks.c.id.in_(deleted)))
            await connection.execute(
                offer_callers_table.delete().where(offer_callers_table.c.task_id.in_(deleted))
            )
            if self._usage is not None:
                await connection.run_sync(self._usage.release_tasks_in, deleted)
        return PurgeReport(tasks=removed_tasks.rowcount or 0, offers=len(deleted))

    async def run(
        self,
        stop: asyncio.Event,
        *,
        interval_s: float,
        on_purge: Callable[[PurgeReport], None] | None = None,
    ) -> None:
        """Purge every `interval_s` until `stop` is set; a failed pass is logged and the next one runs."""
        while not stop.is_set():
            try:
                report = await self.purge()
            except Exception:
                logger.exception("purging unpaid tasks failed; retrying in %.0f s", interval_s)
            else:
                if report.offers:
                    logger.info(
                        "purged %d unpaid tasks and %d offers past their retention",
                        report.tasks,
                        report.offers,
                    )
                if on_purge is not None:
                    on_purge(report)
            try:
                await asyncio.wait_for(stop.wait(), interval_s)
            except TimeoutError:
                continue
