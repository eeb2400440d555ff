"""The readings of one served card: the bytes each verifier family canonicalizes it to.

Usage::

    payload = read_card(card_json, CardReading.SDK_V0_3)   # None: that SDK cannot read this card

A signature covers one byte string, but verifiers disagree on which bytes a card stands for:

* ``a2a``          -- ours (``canonicalize_card``): the JSON exactly as served minus ``signatures``, A2A
  §8.4.1 field presence, RFC 8785. It covers every member served, the 0.3 members of a 1.0 card included.
* ``a2a-sdk-1``    -- a2a-sdk 1.x: the card parsed as its client parses it (``parse_agent_card``: 0.3 members
  mapped to 1.0 fields when ``supportedInterfaces`` is absent, otherwise dropped, unknown members dropped),
  written back with ``MessageToDict``, every empty string, list and object removed, RFC 8785.
* ``a2a-sdk-0.3``  -- a2a-sdk 0.3.x: the card validated as its pydantic ``AgentCard`` (members it does not
  know, such as ``supportedInterfaces``, dropped), dumped by alias without ``None`` and without values
  equal to the model's defaults (``preferredTransport: "JSONRPC"``), empties removed, then Python's
  ``json.dumps`` with sorted keys and ASCII escapes: not RFC 8785.

The SDK readings are computed from the SDK's own parsers (a2a-sdk 1.x ships the 0.3 models unchanged as
``a2a.compat.v0_3.types``), so they track the SDK; tests pin them against both SDKs' verifiers.

``sign_card`` signs one JWS per key for each distinct reading; a signature over an SDK reading names it
in its protected header (``READING_HEADER``), so our verifier knows the signature is not over its own
reading and leaves it aside, while an SDK verifier, which ignores unknown header members, simply tries
every signature and accepts the one over its reading.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import rfc8785
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3.types import AgentCard as AgentCardV0_3
from google.protobuf.json_format import MessageToDict, ParseError
from pydantic import ValidationError

from ._canonical import canonicalize_card

__all__ = ["READING_HEADER", "CardReading", "read_card"]

READING_HEADER = "cardReading"
"""Protected header member naming the reading a signature covers; absent for our own (``a2a``)."""


class CardReading(StrEnum):
    """A way of turning a served card into the bytes a signature covers (see the module docstring)."""

    A2A = "a2a"
    SDK_V1 = "a2a-sdk-1"
    SDK_V0_3 = "a2a-sdk-0.3"


def read_card(card_json: Mapping[str, Any], reading: CardReading) -> bytes | None:
    """The bytes ``reading`` makes of ``card_json`` (minus ``signatures``).

    Returns:
        The payload, or ``None`` when that reader cannot parse the card at all (a 1.0 card has no 0.3
        reading: it lacks the 0.3 ``url``); such a reader refuses the card before checking signatures.

    Raises:
        CanonicalizationError: ``reading`` is ``a2a`` and the card has no canonical form.
    """
    unsigned = {name: value for name, value in card_json.items() if name != "signatures"}
    if reading is CardReading.A2A:
        return canonicalize_card(unsigned)
    if reading is CardReading.SDK_V1:
        return _sdk_v1(unsigned)
    return _sdk_v0_3(unsigned)


def _sdk_v1(unsigned: dict[str, Any]) -> bytes | None:
    try:
        # The parser rewrites the legacy members in place: give it a copy.
        card = parse_agent_card(json.loads(json.dumps(unsigned)))
    except (ParseError, ValueError, TypeError):
        return None
    try:
        return rfc8785.dumps(_without_empties(MessageToDict(card)) or {})
    except (rfc8785.CanonicalizationError, UnicodeError):
        return None


def _sdk_v0_3(unsigned: dict[str, Any]) -> bytes | None:
    try:
        card = AgentCardV0_3.model_validate(unsigned)
    except ValidationError:
        return None
    dumped = card.model_dump(exclude={"signatures"}, exclude_defaults=True, exclude_none=True, by_alias=True)
    try:
        return json.dumps(_without_empties(dumped), separators=(",", ":"), sort_keys=True).encode("utf-8")
    except (TypeError, ValueError):
        return None


def _without_empties(value: Any) -> Any:
    """``value`` with every empty string, list and object removed, bottom up; ``None`` if nothing is left."""
    if isinstance(value, dict):
        kept = {
            name: item
            for name, item in ((n, _without_empties(v)) for n, v in value.items())
            if item is not None
        }
        return kept or None
    if isinstance(value, list):
        items = [item for item in (_without_empties(v) for v in value) if item is not None]
        return items or None
    if value == "":
        return None
    return value
