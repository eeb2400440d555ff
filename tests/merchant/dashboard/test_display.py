"""What the dashboard writes, over plain HTTP on the real merchant: shortened hex values with the whole
value in the page, no explorer link for the dev chain, truthful empty states and finality wording."""

from __future__ import annotations

import html
import re

import httpx

from a2a_x402.merchant.ledger import LedgerReader
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S, wait_until

from .conftest import Shop


def _section(text: str, name: str) -> str:
    start = text.index(f'id="{name}"')
    return text[start : text.index("</section>", start)]


async def _page(shop: Shop, tenant: str, path: str = "") -> httpx.Response:
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        return await http.get(
            shop.dashboard(tenant) + path, headers={"authorization": f"Bearer {shop.tokens[tenant]}"}
        )


async def test_addresses_and_hashes_are_shortened_with_the_whole_value_in_title_and_text(shop: Shop) -> None:
    await shop.paid_task("globex")
    page = await _page(shop, "globex")
    settlements = _section(page.text, "settlements")
    [tx_hash] = re.findall(r'title="(0x[0-9a-f]{64})"', settlements)
    head, middle, tail = tx_hash[:6], tx_hash[6:-4], tx_hash[-4:]

    # Drawn as 0x1234…abcd (the middle takes no room), copied whole: every character is in the text.
    assert f'{head}<span class="mid">{middle}</span>{tail}' in settlements
    assert re.search(r'title="0x[0-9a-fA-F]{40}">0x[0-9a-fA-F]{4}<span class="mid">', settlements)
    # The dev chain has no explorer: no link out anywhere.
    assert "explorer" not in settlements and "etherscan" not in page.text and "basescan" not in page.text


async def test_no_deliveries_yet_only_where_an_endpoint_exists(shop: Shop) -> None:
    acme = await _page(shop, "acme")
    globex = await _page(shop, "globex")

    assert "No deliveries yet." in _section(acme.text, "webhooks")
    assert "No deliveries yet." not in globex.text
    assert "No webhook endpoint is configured." in _section(globex.text, "webhooks")

    await shop.paid_task("globex")
    engine = create_engine(shop.merchant.database_url)
    try:
        [record] = await LedgerReader(engine).settlements("globex")
    finally:
        await engine.dispose()
    detail = await _page(shop, "globex", f"/settlements/{record.entry.id}")
    events = _section(detail.text, "events")
    assert "No deliveries yet." not in events
    assert "No webhook endpoint is configured, so nothing is delivered." in events


async def test_a_final_settlement_says_when_the_reconciler_marked_it_final_not_a_depth_it_did_not_need(
    shop: Shop,
) -> None:
    await shop.paid_task("globex")
    engine = create_engine(shop.merchant.database_url)
    try:
        reader = LedgerReader(engine)

        async def finalized() -> bool:
            [record] = await reader.settlements("globex")
            return record.finalization is not None

        await wait_until(finalized, what="the settlement to be finalized")
        [record] = await reader.settlements("globex")
    finally:
        await engine.dispose()
    assert record.finalization is not None
    when = record.finalization.finalized_at.strftime("%Y-%m-%d %H:%M:%SZ")
    for page in (await _page(shop, "globex"), await _page(shop, "globex", f"/settlements/{record.entry.id}")):
        text = html.unescape(page.text)
        assert f"final since {when}: marked by the reconciler (1 confirmation required)" in text
        assert "final at" not in text
