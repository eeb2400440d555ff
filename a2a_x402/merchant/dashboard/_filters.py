"""The lists' query parameters: a page's cursor and a date range, each range-checked.

In the settlements list `before` is the cursor: the sequence of the last settlement of the page before
(the list runs newest first). In the refused and failed payments' list it is the time (microseconds
since 1970, UTC) and task id of the last payment of the page before: `<microseconds>.<task id>`.
`since` and `until` are UTC days (`YYYY-MM-DD`), both included. An empty parameter is as if not given (a
form sends its empty fields); anything else that is not one of these values is refused with one line
(`FilterError`, answered 422), and nothing is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

__all__ = [
    "FIRST_DAY",
    "FilterError",
    "SettlementFilter",
    "parse_filter",
    "parse_unpaid_cursor",
    "unpaid_cursor",
]

FIRST_DAY = date(2000, 1, 1)
"""The earliest day a range may start: no settlement of this service is older."""
_SEQUENCE_MAX = 2**63 - 1
_LONGEST = 32
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_UNPAID_CURSOR = re.compile(r"([0-9]{1,17})\.(.{1,64})")  # a task id is at most 64 characters


class FilterError(ValueError):
    """A query parameter of the settlements list is not a value it takes; the message is one line."""


@dataclass(frozen=True, slots=True)
class SettlementFilter:
    """Which settlements a page lists: below `before` (a sequence), booked from `since` to `until`."""

    before: int | None = None
    since: date | None = None
    until: date | None = None

    @property
    def since_at(self) -> datetime | None:
        """The start of `since` (UTC), or None."""
        return None if self.since is None else datetime.combine(self.since, time(), UTC)

    @property
    def until_at(self) -> datetime | None:
        """The end of `until` (the next day's start, UTC; excluded), or None."""
        return None if self.until is None else datetime.combine(self.until + timedelta(days=1), time(), UTC)

    def query(self, *, before: int | None = None) -> str:
        """The query string of this filter (with the cursor `before` instead of this one's)."""
        params = {
            "since": "" if self.since is None else self.since.isoformat(),
            "until": "" if self.until is None else self.until.isoformat(),
            "before": "" if before is None else str(before),
        }
        return urlencode({name: value for name, value in params.items() if value})


def parse_filter(query: Mapping[str, str] | Iterable[tuple[str, str]], *, today: date) -> SettlementFilter:
    """The filter that `query` (its parameters, as a mapping or as name-value pairs) asks for, `today`
    being the latest day a range may name. Other parameters are not read.

    Raises:
        FilterError: a parameter is given twice, malformed or out of range, or `since` is after `until`.
    """
    pairs = list(query.items() if isinstance(query, Mapping) else query)
    params: dict[str, str] = {}
    for name, value in pairs:
        if name in ("before", "since", "until"):
            if name in params:
                raise FilterError(f"{name} is given more than once")
            params[name] = value
    for name in ("before", "since", "until"):
        if len(params.get(name, "")) > _LONGEST:
            raise FilterError(f"{name} is too long: at most {_LONGEST} characters")
    before = _sequence(params.get("before", "").strip())
    since = _day("since", params.get("since", "").strip(), today)
    until = _day("until", params.get("until", "").strip(), today)
    if since is not None and until is not None and since > until:
        raise FilterError(f"since ({since}) is after until ({until})")
    return SettlementFilter(before=before, since=since, until=until)


def _sequence(text: str) -> int | None:
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= _SEQUENCE_MAX:
        raise FilterError(f"before must be a whole number from 1 to {_SEQUENCE_MAX}")
    return int(text)


def _day(name: str, text: str, today: date) -> date | None:
    if not text:
        return None
    try:
        if not _DAY.fullmatch(text):
            raise ValueError(text)
        day = date.fromisoformat(text)
    except ValueError:
        raise FilterError(f"{name} must be a day written YYYY-MM-DD") from None
    if not FIRST_DAY <= day <= today:
        raise FilterError(f"{name} must be a day from {FIRST_DAY} to {today} (UTC)")
    return day


def unpaid_cursor(at: datetime, task_id: str) -> str:
    """The cursor of the refused and failed payments' page after the payment of `task_id` at `at`."""
    return f"{(at - _EPOCH) // _MICROSECOND}.{task_id}"


def parse_unpaid_cursor(query: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[datetime, str] | None:
    """The (time, task id) the refused and failed payments' page of `query` starts after, or None.

    Raises:
        FilterError: `before` is given twice or is not a cursor this list makes.
    """
    pairs = list(query.items() if isinstance(query, Mapping) else query)
    given = [value.strip() for name, value in pairs if name == "before"]
    if len(given) > 1:
        raise FilterError("before is given more than once")
    if not given or not given[0]:
        return None
    found = _UNPAID_CURSOR.fullmatch(given[0])
    if found is None:
        raise FilterError("before must be a cursor of this list (a link's, from its Older button)")
    return _EPOCH + int(found.group(1)) * _MICROSECOND, found.group(2)
