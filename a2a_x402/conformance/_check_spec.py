"""What one check of the catalogue is: its id, the BCP 14 level of the sentence it tests, its scope, its
section, and what a conforming merchant does."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["CheckSpec", "Level", "Scope", "make_check"]


class Level(StrEnum):
    """The BCP 14 key word of the requirement a check tests."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


class Scope(StrEnum):
    """What a check runs against: a card, or one interface of a protocol version."""

    CARD = "card"
    """Once per card the merchant serves (the 1.0 card; if it serves 0.3, the 0.3 card and each named
    tenant's own 0.3 card)."""
    A2A_1_0 = "1.0"
    """Once per A2A 1.0 interface (binding and tenant) of the card, in extension v0.3 forms."""
    A2A_0_3 = "0.3"
    """Once per A2A 0.3 interface of the card, in the extension v0.2 forms of §13 and §16."""


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """One requirement the kit checks."""

    id: str
    level: Level
    scope: Scope
    section: str
    """The section of ``spec/v0.3.md`` whose sentence the check tests, e.g. ``"4.3"``."""
    title: str
    """What a conforming merchant does, in one sentence."""


def make_check(check_id: str, level: Level, scope: Scope, section: str, title: str) -> CheckSpec:
    """The ``CheckSpec`` of these members (the catalogue's rows, each on a few lines)."""
    return CheckSpec(check_id, level, scope, section, title)
