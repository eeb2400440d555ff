"""The settlements list (cursor pages, date range, 422 on a bad value), the totals, what was bought, the
payers and the refused payments, over plain HTTP on the real merchant (and a page walk on its ledger)."""

from __future__ import annotations

import html
from datetime import UTC, date, datetime, timedelta

import httpx
import pytest

from a2a_x402.merchant.dashboard import DashboardData
from a2a_x402.merchant.dashboard._filters import FilterError, SettlementFilter, parse_filter
from a2a_x402.merchant.ledger import LedgerReader
from a2a_x402.merchant.payments import OfferReader
from a2a_x402.merchant.webhooks import Outbox, WebhookEndpoints
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.faults.clients import open_task, pay
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import MerchantWire

from .conftest import Shop


def _section(text: str, name: str) -> str:
    start = text.index(f'id="{name}"')
    return text[start : text.index("</section>", start)]


async def _get(shop: Shop, tenant: str, path: str, **params: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        return await http.get(
            shop.dashboard(tenant) + path,
            params=params,
            headers={"authorization": f"Bearer {shop.tokens[tenant]}"},
        )


async def _sequences(shop: Shop, tenant: str) -> list[tuple[int, str]]:
    engine = create_engine(shop.merchant.database_url)
    try:
        records = await LedgerReader(engine).settlements(tenant)
    finally:
        await engine.dispose()
    return [(record.entry.sequence, record.entry.task_id) for record in records]


async def test_the_list_pages_by_cursor_and_date_range_newest_first(shop: Shop) -> None:
    paid = [await shop.paid_task("globex") for _ in range(3)]
    [(newest, newest_task), (_, middle_task), (_, oldest_task)] = await _sequences(shop, "globex")
    assert [newest_task, middle_task, oldest_task] == paid[::-1]
    today = datetime.now(UTC).date()

    every = await _get(shop, "globex", "/settlements")
    older = await _get(shop, "globex", "/settlements", before=str(newest))
    today_only = await _get(shop, "globex", "/settlements", since=str(today), until=str(today))
    long_ago = await _get(shop, "globex", "/settlements", since="2000-01-01", until="2000-01-02")
    other = await _get(shop, "acme", "/settlements")

    assert every.status_code == 200
    rows = _section(every.text, "settlements")
    assert rows.index(newest_task) < rows.index(middle_task) < rows.index(oldest_task)
    assert newest_task not in older.text and middle_task in older.text and oldest_task in older.text
    assert 'rel="first"' in older.text
    assert all(task in today_only.text for task in paid)
    assert long_ago.status_code == 200 and not any(task in long_ago.text for task in paid)
    assert "No settlement in this range." in long_ago.text
    assert not any(task in other.text for task in paid) and "No settlements yet." in other.text
    # What was bought: the skill each task was priced for.
    assert 'class="skill">' in rows


async def test_walking_the_pages_by_their_cursor_visits_every_settlement_once(shop: Shop) -> None:
    paid = [await shop.paid_task("globex") for _ in range(3)]
    engine = create_engine(shop.merchant.database_url)
    try:
        data = DashboardData(
            ledger=LedgerReader(engine),
            outbox=Outbox(engine),
            endpoints=WebhookEndpoints(engine),
            reconciler=None,
            assets={},
            confirmations=1,
            offers=OfferReader(engine),
        )
        seen: list[str] = []
        wanted = SettlementFilter()
        for _ in range(5):
            page = await data.settlement_page("globex", wanted, size=2)
            seen.extend(row.task_id for row in page.rows)
            if page.next_before is None:
                break
            wanted = SettlementFilter(before=page.next_before)
    finally:
        await engine.dispose()
    assert seen == paid[::-1]


@pytest.mark.parametrize(
    "params",
    [
        {"before": "abc"},
        {"before": "0"},
        {"before": "-1"},
        {"before": str(2**63)},
        {"before": "１２"},
        {"since": "2026-13-01"},
        {"since": "2026-W49-5"},
        {"since": "20261201"},
        {"since": "1999-12-31"},
        {"until": "9999-12-31"},
        {"since": "2026-12-02", "until": "2026-12-01"},
        {"since": "2" * 33},
        [("before", "1"), ("before", "abc")],
        [("since", "2026-12-01"), ("since", "2026-12-01")],
    ],
    ids=lambda params: "&".join(
        f"{k}={v[:12]}" for k, v in (params.items() if isinstance(params, dict) else params)
    ),
)
async def test_a_bad_filter_is_refused_with_422_and_one_line(
    shop: Shop, params: dict[str, str] | list[tuple[str, str]]
) -> None:
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        answer = await http.get(
            shop.dashboard("globex") + "/settlements",
            params=tuple(params.items() if isinstance(params, dict) else params),
            headers={"authorization": f"Bearer {shop.tokens['globex']}"},
        )
    assert answer.status_code == 422
    assert 'role="alert"' in answer.text and "<table" not in answer.text


async def test_filters_parse_to_a_utc_range_and_a_cursor() -> None:
    today = date(2026, 12, 4)
    assert parse_filter({}, today=today) == SettlementFilter()
    assert parse_filter({"before": "", "since": "", "until": ""}, today=today) == SettlementFilter()
    wanted = parse_filter({"since": "2026-12-01", "until": "2026-12-04", "before": "7"}, today=today)
    assert wanted.since_at == datetime(2026, 12, 1, tzinfo=UTC)
    assert wanted.until_at == datetime(2026, 12, 5, tzinfo=UTC)
    assert wanted.query(before=3) == "since=2026-12-01&until=2026-12-04&before=3"
    with pytest.raises(FilterError, match="^until must be a day from 2000-01-01 to 2026-12-04"):
        parse_filter({"until": str(today + timedelta(days=1))}, today=today)


async def test_a_stranger_gets_no_list(shop: Shop) -> None:
    await shop.paid_task("globex")
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        none = await http.get(shop.dashboard("globex") + "/settlements")
        other = await http.get(
            shop.dashboard("globex") + "/settlements",
            headers={"authorization": f"Bearer {shop.tokens['acme']}"},
        )
        bad = await http.get(shop.dashboard("globex") + "/settlements", params={"before": "x"})
    assert none.status_code == other.status_code == bad.status_code == 401
    assert "je_" not in none.text + other.text + bad.text


async def test_totals_payers_and_a_refused_payment_with_its_reason(shop: Shop) -> None:
    await shop.paid_task("globex")
    await shop.paid_task("globex")
    async with shop.merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc", "globex")
        refused_task, terms = await open_task(wire)
        broke = shop.new_payer(0)
        answer = await pay(wire, refused_task, sign_payment(broke, terms))
    assert answer["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", answer["status"]
    price = shop.prices["globex"]
    page = await _get(shop, "globex", "")

    totals = html.unescape(_section(page.text, "totals"))
    assert totals.count(f">${2 * price / 10**6:.2f}<") == 3  # today, 7 days, 30 days
    payers = _section(page.text, "payers")
    assert payers.count("data-payer=") == 2 and payers.count('class="num">1<') == 2
    unpaid = html.unescape(_section(page.text, "unpaid"))
    assert refused_task in unpaid and "INSUFFICIENT_FUNDS" in unpaid and "refused" in unpaid
    acme = await _get(shop, "acme", "")
    assert refused_task not in acme.text and "No payment was refused or failed." in acme.text
