"""What a metered (`upto`) task used, told beside its receipts on ``payment-completed``.

Wire form (``x402.payment.usage`` on extension v0.2, the member ``usage`` of the extension object on
v0.3); every number is a decimal string of a non-negative integer, as x402 amounts are::

    {"maximum": "50000", "settled": "1200",
     "items": [{"name": "tokens", "quantity": "1200", "unitPrice": "1", "amount": "1200"}]}

Each item's ``amount`` is its ``quantity`` times its ``unitPrice`` (atomic units of the asset), and
``settled`` is the sum of the items' amounts, capped at ``maximum`` (what the payer signed for).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ._errors import ExtensionMetadataError, MetadataErrorCode, child_path
from ._numbers import JsonValue, json_type_name

__all__ = ["MAX_USAGE_ITEMS", "MAX_USAGE_NAME_CHARS", "PaymentUsage", "UsageItem", "parse_usage"]

MAX_USAGE_ITEMS = 100
"""Most items one usage report lists."""
MAX_USAGE_NAME_CHARS = 128
"""Longest name of what an item measured."""

_DECIMAL = re.compile(r"0|[1-9][0-9]{0,77}")
_LIMIT = 2**256
_ITEM_KEYS = ("name", "quantity", "unitPrice", "amount")
_USAGE_KEYS = ("maximum", "settled", "items")


def _inconsistent(path: str, detail: str) -> ExtensionMetadataError:
    return ExtensionMetadataError(MetadataErrorCode.INCONSISTENT_CONTENT, detail, path)


def _check_whole(value: int, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _LIMIT:
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_NUMBER, "expected an integer in [0, 2**256)", path
        )


@dataclass(frozen=True, slots=True)
class UsageItem:
    """One thing a task measured: ``quantity`` of it at ``unit_price`` atomic units each, ``amount`` in all.

    Raises:
        ExtensionMetadataError: a name that is empty or too long, a number out of [0, 2**256), or an
            ``amount`` other than ``quantity * unit_price``.
    """

    name: str
    quantity: int
    unit_price: int
    amount: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not 0 < len(self.name) <= MAX_USAGE_NAME_CHARS:
            raise ExtensionMetadataError(
                MetadataErrorCode.INVALID_TYPE,
                f"expected a name of 1 to {MAX_USAGE_NAME_CHARS} characters",
                "name",
            )
        for name, value in (
            ("quantity", self.quantity),
            ("unitPrice", self.unit_price),
            ("amount", self.amount),
        ):
            _check_whole(value, name)
        if self.amount != self.quantity * self.unit_price:
            raise _inconsistent("amount", "must be quantity times unitPrice")

    def to_wire(self) -> dict[str, JsonValue]:
        """The wire form: numbers as decimal strings."""
        return {
            "name": self.name,
            "quantity": str(self.quantity),
            "unitPrice": str(self.unit_price),
            "amount": str(self.amount),
        }


@dataclass(frozen=True, slots=True)
class PaymentUsage:
    """What a metered task used: its items, the ``maximum`` the payer signed for, and what was ``settled``.

    Raises:
        ExtensionMetadataError: more than ``MAX_USAGE_ITEMS`` items, a number out of [0, 2**256), or a
            ``settled`` other than the sum of the items' amounts capped at ``maximum``; the path is
            relative to the usage value (``items[0].amount``).
    """

    maximum: int
    settled: int
    items: tuple[UsageItem, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))
        _check_whole(self.maximum, "maximum")
        _check_whole(self.settled, "settled")
        if len(self.items) > MAX_USAGE_ITEMS:
            raise ExtensionMetadataError(
                MetadataErrorCode.TOO_LARGE, f"more than {MAX_USAGE_ITEMS} items", "items"
            )
        for index, item in enumerate(self.items):
            if not isinstance(item, UsageItem):
                raise ExtensionMetadataError(
                    MetadataErrorCode.INVALID_TYPE,
                    f"expected a UsageItem, got {type(item).__name__}",
                    child_path("items", index),
                )
        if self.settled != min(sum(item.amount for item in self.items), self.maximum):
            raise _inconsistent("settled", "must be the sum of the items' amounts, capped at maximum")

    def to_wire(self) -> dict[str, JsonValue]:
        """The wire form: numbers as decimal strings, items in order."""
        return {
            "maximum": str(self.maximum),
            "settled": str(self.settled),
            "items": [item.to_wire() for item in self.items],
        }


def parse_usage(value: JsonValue, path: str) -> PaymentUsage:
    """Read a usage value (already normalised) whose place in the metadata is ``path``.

    Raises:
        ExtensionMetadataError: anything but exactly the wire form, or content ``PaymentUsage`` refuses;
            the path names the offending member.
    """
    members = _object(value, _USAGE_KEYS, path)
    items = members["items"]
    items_path = child_path(path, "items")
    if not isinstance(items, list):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an array, got {json_type_name(items)}", items_path
        )
    if len(items) > MAX_USAGE_ITEMS:
        raise ExtensionMetadataError(
            MetadataErrorCode.TOO_LARGE, f"more than {MAX_USAGE_ITEMS} items", items_path
        )
    parsed = tuple(_item(item, child_path(items_path, index)) for index, item in enumerate(items))
    maximum = _decimal(members["maximum"], child_path(path, "maximum"))
    settled = _decimal(members["settled"], child_path(path, "settled"))
    try:
        return PaymentUsage(maximum, settled, parsed)
    except ExtensionMetadataError as exc:
        raise ExtensionMetadataError(exc.code, exc.detail, f"{path}.{exc.path}") from None


def _item(value: JsonValue, path: str) -> UsageItem:
    members = _object(value, _ITEM_KEYS, path)
    name = members["name"]
    if not isinstance(name, str):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE,
            f"expected a string, got {json_type_name(name)}",
            child_path(path, "name"),
        )
    numbers = [_decimal(members[key], child_path(path, key)) for key in _ITEM_KEYS[1:]]
    try:
        return UsageItem(name, *numbers)
    except ExtensionMetadataError as exc:
        raise ExtensionMetadataError(exc.code, exc.detail, f"{path}.{exc.path}") from None


def _object(value: JsonValue, keys: tuple[str, ...], path: str) -> Mapping[str, JsonValue]:
    if not isinstance(value, dict):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an object, got {json_type_name(value)}", path
        )
    for key in value:
        if key not in keys:
            raise ExtensionMetadataError(
                MetadataErrorCode.UNKNOWN_FIELD, "not a field of usage", child_path(path, key)
            )
    for key in keys:
        if key not in value:
            raise ExtensionMetadataError(
                MetadataErrorCode.MISSING_FIELD, "required field is missing", child_path(path, key)
            )
    return value


def _decimal(value: JsonValue, path: str) -> int:
    if not isinstance(value, str):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected a decimal string, got {json_type_name(value)}", path
        )
    if not _DECIMAL.fullmatch(value) or int(value) >= _LIMIT:
        # The value is not quoted: it is untrusted and may be long.
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_NUMBER, "expected a decimal string of an integer in [0, 2**256)", path
        )
    return int(value)
