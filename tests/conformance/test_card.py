"""Where the kit looks for a named tenant's own 0.3 card (§12.1): under a base of its 0.3 interface URLs."""

from __future__ import annotations

from a2a_x402.conformance._card import tenant_card_urls

CARD = "/.well-known/agent-card.json"


def test_the_bases_of_the_interfaces_nearest_first_without_the_origin() -> None:
    urls = ["https://shop.example/t/acme/a2a/jsonrpc", "https://shop.example/t/acme/a2a/rest"]
    assert tenant_card_urls(urls) == [
        f"https://shop.example/t/acme/a2a{CARD}",
        f"https://shop.example/t/acme{CARD}",
        f"https://shop.example/t{CARD}",
    ]


def test_interfaces_sharing_no_path_or_origin_have_no_base_of_their_own() -> None:
    assert tenant_card_urls(["https://a.example/x/jsonrpc", "https://b.example/x/rest"]) == []
    assert tenant_card_urls(["https://a.example/jsonrpc", "https://a.example/rest"]) == []
    assert tenant_card_urls([]) == []
