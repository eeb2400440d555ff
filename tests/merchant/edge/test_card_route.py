"""The card route's signed documents: each distinct document is signed once; only a bounded LRU is kept."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import AgentCard

from a2a_x402.merchant.edge import build_agent_card, served_versions
from a2a_x402.merchant.edge._card_route import AgentCardEndpoint
from a2a_x402.merchant.edge.versions import ProtocolVersion, VersionNegotiator

from .conftest import make_card, make_tenants


def endpoint(description: list[str], signed: list[str], **options: Any) -> AgentCardEndpoint:
    """A card route whose modifier sets the card's description to `description[0]`; `signed` logs signings."""
    tenants = make_tenants()
    cards = {
        version: build_agent_card(make_card("https://shop.example"), tenants, version)
        for version in served_versions(tenants)
    }

    async def modifier(card: AgentCard) -> AgentCard:
        modified = AgentCard()
        modified.CopyFrom(card)
        modified.description = description[0]
        return modified

    def signer(card: dict[str, Any]) -> dict[str, Any]:
        signed.append(card["description"])
        return {**card, "signatures": [{"protected": "e30", "signature": str(len(signed))}]}

    return AgentCardEndpoint(
        cards,
        negotiator=VersionNegotiator(cards),
        modifier=modifier,
        cache_control="public, max-age=60",
        signer=signer,
        **options,
    )


async def test_signed_documents_are_kept_in_a_bounded_lru() -> None:
    description = ["a"]
    signed: list[str] = []
    route = endpoint(description, signed, signed_cache_size=2)
    bodies: list[bytes] = []
    for text in "abacab":
        description[0] = text
        bodies.append((await route.document(ProtocolVersion.V1_0)).body)

    # a, b signed; a reused (now most recent); c signed, b dropped; a reused; b signed again, c dropped.
    assert signed == ["a", "b", "c", "b"]
    assert bodies[0] == bodies[2] == bodies[4] and bodies[1] != bodies[5]


def test_the_signed_cache_holds_at_least_one_document() -> None:
    with pytest.raises(ValueError, match="signed_cache_size"):
        endpoint(["a"], [], signed_cache_size=0)
