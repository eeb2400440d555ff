"""The bounds on a tenant's callers' unpaid work: the operator's (settings, or the tenant's table in the
tenants file), which are a ceiling, and the tenant's own, set through its billing API and stored.

A tenant may only tighten what the operator allows: each of its own limits is a whole number between the
least that makes sense (one task; one a minute; a retention of `MIN_RETENTION_S`, the terms' timeout) and
the operator's value, and the limit applied is the lower of the two, so a ceiling the operator lowers later
holds at once. A limit the tenant leaves out (or sets to null) is the operator's. `parse_own_limits` reads a
request body into `OwnLimits`, or refuses it whole with one line (`InvalidLimitsError`): nothing is stored.

`OwnLimitStore` keeps them in `tenant_unpaid_limits` (migration m0013), one row per tenant, written whole by
each change (of two concurrent changes, one wins entirely). Every priced request reads them, so they are
cached in the process: a change made here is seen by the next request (the cache entry is dropped on
write, and a read that raced the write is not kept); one made by another replica within `ttl_s`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write

from ._offer_table import offers_table

__all__ = [
    "MIN_RETENTION_S",
    "InvalidLimitsError",
    "OwnLimitStore",
    "OwnLimits",
    "UnpaidRules",
    "applied_rules",
    "parse_own_limits",
    "rules_json",
    "tenant_limits_table",
]

MIN_RETENTION_S = 300
"""The shortest retention a tenant may set: an unpaid task is kept as long as its terms can be paid."""
_TTL_S = 5.0
# (JSON name, field, least value) of each limit a tenant may set.
_FIELDS = (
    ("maxAwaitingPerCaller", "max_awaiting", 1),
    ("maxUnpaidPerMinutePerCaller", "max_per_minute", 1),
    ("retentionSeconds", "retention_s", MIN_RETENTION_S),
)
_SHAPE = '{"unpaid": {"maxAwaitingPerCaller": N, "maxUnpaidPerMinutePerCaller": N, "retentionSeconds": N}}'

tenant_limits_table = sa.Table(
    "tenant_unpaid_limits",
    offers_table.metadata,
    sa.Column("tenant", sa.String(64), primary_key=True),
    sa.Column("max_awaiting", sa.Integer, nullable=True),
    sa.Column("max_per_minute", sa.Integer, nullable=True),
    sa.Column("retention_s", sa.Integer, nullable=True),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
)


@dataclass(frozen=True, slots=True)
class UnpaidRules:
    """One tenant's bounds on unpaid work (see `_unpaid`)."""

    max_awaiting: int = 100
    max_per_minute: int = 60
    retention_s: float = 3600.0


@dataclass(frozen=True, slots=True)
class OwnLimits:
    """The limits a tenant set itself; None where it leaves the operator's."""

    max_awaiting: int | None = None
    max_per_minute: int | None = None
    retention_s: int | None = None


class InvalidLimitsError(ValueError):
    """A change of limits refused, whole; the message says why in one line (and never echoes a long value)."""

    code = "invalid_limits"


def applied_rules(ceiling: UnpaidRules, own: OwnLimits) -> UnpaidRules:
    """The bounds applied: each of the tenant's own limits where it set one, never above the `ceiling`."""
    tighter: dict[str, Any] = {}
    for _name, field, _least in _FIELDS:
        value = getattr(own, field)
        if value is not None:
            tighter[field] = min(value, getattr(ceiling, field))
    return dataclasses.replace(ceiling, **tighter)


def rules_json(limits: UnpaidRules | OwnLimits) -> dict[str, int | None]:
    """The three limits by their JSON names (null where a tenant set none)."""
    values = {name: getattr(limits, field) for name, field, _least in _FIELDS}
    return {name: None if value is None else int(value) for name, value in values.items()}


def parse_own_limits(body: bytes, ceiling: UnpaidRules) -> OwnLimits:
    """The limits a change's JSON `body` sets (`_SHAPE`), each within [least, `ceiling`'s].

    Raises:
        InvalidLimitsError: the body is not that shape, names another field, or holds a value that is not
            a whole number in range.
    """
    try:
        # orjson: a bounded nesting depth, and no NaN or Infinity.
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidLimitsError(f"the body is not JSON; send {_SHAPE}") from None
    if (
        not isinstance(document, dict)
        or set(document) != {"unpaid"}
        or not isinstance(document["unpaid"], dict)
    ):
        raise InvalidLimitsError(f"the body must be {_SHAPE}")
    given: dict[str, object] = document["unpaid"]
    names = [name for name, _field, _least in _FIELDS]
    for name in given:
        if name not in names:
            known = ", ".join(names)
            raise InvalidLimitsError(f"unknown limit {_shown(name)} in unpaid: a tenant sets {known}")
    own: dict[str, int | None] = {}
    for name, field, least in _FIELDS:
        value = given.get(name)
        if value is None:
            own[field] = None
            continue
        most = int(getattr(ceiling, field))
        least = min(least, most)
        # A bool is an int to Python, and orjson reads an integer past 64 bits as a float: both refused.
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            allowed = f"a whole number from {least} to {most} (the operator's ceiling) or null"
            raise InvalidLimitsError(f"unpaid.{name} must be {allowed}, got {_shown(value)}")
        own[field] = value
    return OwnLimits(**own)


def _shown(value: object) -> str:
    """`value` for a one-line refusal, cut short: a body can be made of a single huge value."""
    text = repr(value) if isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."


class OwnLimitStore:
    """The tenants' own limits in `engine`'s `tenant_unpaid_limits`, cached (see the module)."""

    def __init__(self, engine: AsyncEngine, *, ttl_s: float = _TTL_S) -> None:
        self._engine = engine
        self._ttl_s = ttl_s
        self._cache: dict[str, tuple[float, OwnLimits]] = {}
        # Bumped by each write of a tenant's limits: a read begun before it does not fill the cache.
        self._writes: dict[str, int] = {}

    async def get(self, tenant: str) -> OwnLimits:
        """`tenant`'s own limits (none set: every field None)."""
        cached = self._cache.get(tenant)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self._ttl_s:
            return cached[1]
        writes = self._writes.get(tenant, 0)
        table = tenant_limits_table
        query = sa.select(table.c.max_awaiting, table.c.max_per_minute, table.c.retention_s).where(
            table.c.tenant == tenant
        )
        async with self._engine.connect() as connection:
            row = (await connection.execute(query)).one_or_none()
        own = OwnLimits() if row is None else OwnLimits(*row)
        if self._writes.get(tenant, 0) == writes:
            self._cache[tenant] = (now, own)
        return own

    async def put(self, tenant: str, own: OwnLimits) -> None:
        """Store `own` as `tenant`'s limits, replacing whatever it had; seen by the next `get` here."""
        row = {
            "tenant": tenant,
            **dataclasses.asdict(own),
            "updated_at": datetime.now(UTC),
        }
        dialect = postgresql if self._engine.dialect.name == "postgresql" else sqlite
        insert = dialect.insert(tenant_limits_table)
        upsert = insert.on_conflict_do_update(
            index_elements=[tenant_limits_table.c.tenant],
            set_={name: insert.excluded[name] for name in row if name != "tenant"},
        )

        def operation(connection: sa.Connection) -> None:
            connection.execute(upsert, row)

        self._writes[tenant] = self._writes.get(tenant, 0) + 1
        self._cache.pop(tenant, None)
        try:
            await write(self._engine, operation)
        finally:
            # Once more after the commit: a read that began meanwhile may have cached the old row.
            self._writes[tenant] += 1
            self._cache.pop(tenant, None)
