"""The usage meter: what the work of a metered skill reports it used during its paid turn.

A metered skill's payer signs for a maximum (x402 `upto`); the merchant settles what the work used, capped at
that maximum. The wrapped executor reports its usage on the `RequestContext` it was given::

    from a2a_x402.merchant import usage_meter

    usage_meter(context).add("tokens", quantity=1234, unit_price=25)

Each report is an item: what was measured, how much of it, and its price per unit in atomic units; reports of
the same name at the same unit price add up. Outside the paid turn of a metered skill (a fixed-price or free
skill, an unpaid request) the meter checks each report as strictly and records nothing, so one executor can
serve a skill that one tenant meters and another prices fixed; `UsageMeter.metered` tells which it is. A
report after the work returned is refused: the amount to settle is fixed by then.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from a2a.server.agent_execution import RequestContext

from a2a_x402.extension import PaymentUsage, UsageItem

__all__ = ["USAGE_METER_KEY", "UsageError", "UsageMeter", "metering", "usage_from_json", "usage_meter"]

USAGE_METER_KEY = "a2a_x402.usage_meter"
"""Where a metered paid turn keeps its meter: the request's `ServerCallContext.state`."""

_UINT256_LIMIT = 2**256
_MAX_NAME_CHARS = 64
# Items are stored with the offer and sent to the payer: a bounded list, however often the work reports.
_MAX_ITEMS = 32


class UsageError(ValueError):
    """A usage report the meter refuses (a wrong name, quantity or unit price, too many distinct items, or a
    report after the paid turn ended); nothing of it is recorded."""

    code = "usage_invalid"


class UsageMeter:
    """The usage of one paid turn, reported by its work; `metered` is False outside a metered paid turn,
    where reports are checked and then dropped."""

    def __init__(self, maximum: int | None) -> None:
        self._maximum = maximum
        self._quantities: dict[tuple[str, int], int] = {}
        self._closed = False

    @property
    def metered(self) -> bool:
        """Whether reports count: the meter belongs to the paid turn of a metered skill."""
        return self._maximum is not None

    def add(self, name: str, *, quantity: int, unit_price: int) -> None:
        """Report `quantity` units of `name` used, at `unit_price` atomic units each.

        Raises:
            UsageError: `name` is not 1 to 64 printable characters; `quantity` or `unit_price` is not an
                integer in [0, 2**256), or the item's amount would reach 2**256; a 33rd distinct item (name
                and unit price); or the paid turn is over.
        """
        if self._closed:
            raise UsageError("the paid turn is over: usage is reported while the work runs")
        if not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME_CHARS or not name.isprintable():
            raise UsageError(
                f"usage name must be 1 to {_MAX_NAME_CHARS} printable characters, got {name!r:.80}"
            )
        _check_whole("quantity", quantity)
        _check_whole("unit_price", unit_price)
        key = (name, unit_price)
        if key not in self._quantities and len(self._quantities) >= _MAX_ITEMS:
            raise UsageError(f"at most {_MAX_ITEMS} distinct usage items (name and unit price) in one turn")
        summed = self._quantities.get(key, 0) + quantity
        if summed * unit_price >= _UINT256_LIMIT:
            raise UsageError(f"usage of {name!r} costs 2**256 atomic units or more")
        if self._maximum is not None:
            self._quantities[key] = summed

    def record(self) -> PaymentUsage:
        """What was reported, and what it settles: the items' sum capped at the maximum (an unmetered
        meter's usage has a maximum of 0 and no items)."""
        items = tuple(
            UsageItem(name, quantity, price, quantity * price)
            for (name, price), quantity in self._quantities.items()
        )
        maximum = self._maximum or 0
        return PaymentUsage(maximum, min(sum(item.amount for item in items), maximum), items)

    def close(self) -> PaymentUsage:
        """End the turn's reporting (a later report is refused) and return what was reported."""
        self._closed = True
        return self.record()


def _check_whole(what: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(
            f"usage {what} must be a whole number (an int), got {type(value).__name__} {value!r:.40}"
        )
    if value < 0:
        raise UsageError(f"usage {what} must not be negative, got {value}")
    if value >= _UINT256_LIMIT:
        raise UsageError(f"usage {what} must be below 2**256, got {value:.3g}")


def usage_meter(context: RequestContext) -> UsageMeter:
    """The usage meter of the turn `context` (the `RequestContext` the executor was given) belongs to.

    In the paid turn of a metered skill its reports are what the payer is charged, capped at the maximum the
    payer signed for; anywhere else it checks each report and records nothing (`UsageMeter.metered` is
    False), so an executor need not know how each tenant prices its skill.
    """
    meter = context.call_context.state.get(USAGE_METER_KEY)
    return meter if isinstance(meter, UsageMeter) else UsageMeter(None)


@contextmanager
def metering(context: RequestContext, maximum: int) -> Iterator[UsageMeter]:
    """Meter the work run within, on `context`'s request, up to `maximum`; the meter is closed on leaving."""
    meter = UsageMeter(maximum)
    state = context.call_context.state
    state[USAGE_METER_KEY] = meter
    try:
        yield meter
    finally:
        meter.close()
        if state.get(USAGE_METER_KEY) is meter:
            del state[USAGE_METER_KEY]


def usage_from_json(stored: Mapping[str, Any]) -> PaymentUsage:
    """A usage from its wire form (`PaymentUsage.to_wire`), as an offer stores it."""
    items = tuple(
        UsageItem(str(item["name"]), int(item["quantity"]), int(item["unitPrice"]), int(item["amount"]))
        for item in stored["items"]
    )
    return PaymentUsage(int(stored["maximum"]), int(stored["settled"]), items)
