"""Read-only queries over payment offers for the tenant's dashboard: what a paid task bought, and the
payments that were refused or failed, with their reason.

An offer records the skill a task was priced for and the x402 terms it was offered (whose `resource`
carries the description shown to the payer). A payment that did not go through leaves its offer
`failed` (for good), `rejected` (the client declined or canceled), or back at `offered` with the error
code of the refused attempt (fresh terms after a retryable failure). Every query names the tenant.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.extension import PaymentErrorCode

from ._offer_table import OfferState, offers_table
from ._refusals import CLIENT_TEXTS

__all__ = ["OfferReader", "Purchase", "UnpaidAttempt"]

_TASKS_PER_QUERY = 500
_LIMIT_MAX = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class Purchase:
    """What a task was priced for: its skill and the description the payer was shown."""

    task_id: str
    skill: str
    description: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UnpaidAttempt:
    """A payment that did not go through: the offer's state, its error code (None when the client
    declined) and the merchant's sentence for it."""

    task_id: str
    skill: str
    state: OfferState
    error: str | None
    reason: str
    payer: str | None
    amount: int | None
    asset: str | None
    network: str | None
    at: datetime


def _description(required: dict[str, Any]) -> str:
    resource = required.get("resource")
    if isinstance(resource, dict) and isinstance(resource.get("description"), str):
        return str(resource["description"])
    accepts = required.get("accepts")
    if isinstance(accepts, list) and accepts and isinstance(accepts[0], dict):
        description = accepts[0].get("description")
        if isinstance(description, str):
            return description
    return ""


def _terms(required: dict[str, Any]) -> tuple[int | None, str | None, str | None]:
    """The first accepted terms' amount, asset and network, as far as they are well-formed."""
    accepts = required.get("accepts")
    if not (isinstance(accepts, list) and accepts and isinstance(accepts[0], dict)):
        return None, None, None
    first = accepts[0]
    raw = first.get("amount", first.get("maxAmountRequired"))
    amount = int(raw) if isinstance(raw, str) and raw.isdigit() else None
    asset = first.get("asset") if isinstance(first.get("asset"), str) else None
    network = first.get("network") if isinstance(first.get("network"), str) else None
    return amount, asset, network


def _reason(state: OfferState, error: str | None) -> str:
    if error is not None:
        try:
            return CLIENT_TEXTS[PaymentErrorCode(error)]
        except ValueError:
            return error
    if state is OfferState.REJECTED:
        return "The client declined the payment terms or canceled the task."
    return "No reason was recorded."


class OfferReader:
    """Queries over the `payment_offers` table for one tenant at a time; it never writes."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def purchases(self, tenant: str, task_ids: Iterable[str]) -> dict[str, Purchase]:
        """What each of the tenant's tasks in `task_ids` was priced for (tasks without an offer, or
        another tenant's, are left out)."""
        wanted = sorted(set(task_ids))
        found: dict[str, Purchase] = {}
        async with self._engine.connect() as connection:
            for start in range(0, len(wanted), _TASKS_PER_QUERY):
                statement = sa.select(
                    offers_table.c.task_id, offers_table.c.skill, offers_table.c.required
                ).where(
                    offers_table.c.tenant == tenant,
                    offers_table.c.task_id.in_(wanted[start : start + _TASKS_PER_QUERY]),
                )
                for row in await connection.execute(statement):
                    found[row.task_id] = Purchase(
                        task_id=row.task_id, skill=row.skill, description=_description(row.required)
                    )
        return found

    async def unpaid(
        self, tenant: str, *, limit: int = 50, after: tuple[datetime, str] | None = None
    ) -> list[UnpaidAttempt]:
        """The tenant's payments that were refused (the offer is open again with an error code), failed
        or were rejected, the most recent first (then by task id), at most `limit` (1 to 500); only those
        listed after `after`, the (time, task id) of the last attempt of the page before, when given."""
        condition = _unpaid(tenant)
        if after is not None:
            at, task_id = after
            condition = sa.and_(
                condition,
                sa.or_(
                    offers_table.c.updated_at < at,
                    sa.and_(offers_table.c.updated_at == at, offers_table.c.task_id > task_id),
                ),
            )
        statement = (
            sa.select(offers_table)
            .where(condition)
            .order_by(offers_table.c.updated_at.desc(), offers_table.c.task_id)
            .limit(max(1, min(limit, _LIMIT_MAX)))
        )
        async with self._engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
        attempts = []
        for row in rows:
            state = OfferState(row.state)
            amount, asset, network = _terms(row.required)
            attempts.append(
                UnpaidAttempt(
                    task_id=row.task_id,
                    skill=row.skill,
                    state=state,
                    error=row.error,
                    reason=_reason(state, row.error),
                    payer=row.payer,
                    amount=amount,
                    asset=asset,
                    network=network,
                    at=row.updated_at,
                )
            )
        return attempts

    async def unpaid_count(self, tenant: str) -> int:
        """How many payments of the tenant `unpaid` lists, all of them."""
        statement = sa.select(sa.func.count()).select_from(offers_table).where(_unpaid(tenant))
        async with self._engine.connect() as connection:
            return int((await connection.execute(statement)).scalar_one())


def _unpaid(tenant: str) -> sa.ColumnElement[bool]:
    """The tenant's offers whose payment was refused (open again with an error code), failed or rejected."""
    return sa.and_(
        offers_table.c.tenant == tenant,
        sa.or_(
            offers_table.c.state.in_([OfferState.FAILED.value, OfferState.REJECTED.value]),
            sa.and_(offers_table.c.state == OfferState.OFFERED.value, offers_table.c.error.is_not(None)),
        ),
    )
