"""The overview's capped lists say so with the count the database keeps: the refused and failed payments
page by their cursor (as HTML and as CSV) down to the oldest, and the payers and the unfinalized and
reversed settlements say "the N largest / most recent of M". On the dashboard's own router over a fresh
database, with payments and bookings written as the merchant writes them."""

from __future__ import annotations

import csv
import html
import io
import re

from a2a_x402.merchant.payments import OfferState, OfferStore

from ..ledger.bookings import USDC, booking
from .conftest import LOCAL_PAGE as PAGE
from .conftest import LocalDashboard


async def _failed(store: OfferStore, task_id: str, nonce: int) -> None:
    """An offer of acme's whose payment failed."""
    terms = {"x402Version": 2, "accepts": [{"amount": "100000", "asset": USDC, "network": "eip155:84532"}]}
    assert await store.offer(
        task_id=task_id,
        tenant="acme",
        context_id="ctx",
        skill="text-stats",
        dialect="v0.3",
        required=terms,
        request={"messageId": task_id},
    )
    assert await store.submit(
        task_id, round_=1, payer="0xPayer", nonce=f"0x{nonce:064x}", payload={}, payload_hash="h", accepted={}
    )
    assert await store.advance(task_id, OfferState.FAILED, error="INVALID_SIGNATURE")


def _section(text: str, name: str) -> str:
    start = text.index(f'id="{name}"')
    return html.unescape(text[start : text.index("</section>", start)])


def _tasks(text: str) -> list[str]:
    return re.findall(r'data-task="([^"]+)"', _section(text, "unpaid"))


def _link(text: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', text)
    return None if found is None else html.unescape(found.group(1))


async def test_refused_and_failed_payments_page_by_their_cursor_to_the_oldest_and_the_overview_says_how_many(
    local_dashboard: LocalDashboard,
) -> None:
    http, _, offers = local_dashboard
    task_ids = [f"task-{index:02d}" for index in range(30)]
    for index, task_id in enumerate(task_ids):
        await _failed(offers, task_id, index + 1)

    overview = await http.get(PAGE)
    first = await http.get(f"{PAGE}/unpaid")
    older_url = _link(first.text, "next")
    assert older_url is not None
    older = await http.get(older_url)
    older_csv = await http.get(older_url.replace("/unpaid?", "/unpaid.csv?"))
    bad = await http.get(f"{PAGE}/unpaid", params={"before": "yesterday"})
    bad_csv = await http.get(f"{PAGE}/unpaid.csv", params={"before": "x.1"})
    stranger = await http.get(f"{PAGE}/unpaid", headers={"authorization": "Bearer wrong-token-0123456789"})

    unpaid = _section(overview.text, "unpaid")
    assert "The 25 most recent of 30." in unpaid and f'href="{PAGE}/unpaid"' in unpaid
    assert _tasks(overview.text) == _tasks(first.text) and len(_tasks(first.text)) == 25
    assert _link(first.text, "first") is None
    assert sorted(_tasks(first.text) + _tasks(older.text)) == task_ids
    assert len(_tasks(older.text)) == 5 and _link(older.text, "next") is None
    assert _link(older.text, "first") == f"{PAGE}/unpaid"
    rows = list(csv.DictReader(io.StringIO(older_csv.text)))
    assert [row["task_id"] for row in rows] == _tasks(older.text)
    assert bad.status_code == 422 and 'role="alert"' in bad.text and f'href="{PAGE}/unpaid"' in bad.text
    assert (bad_csv.status_code, stranger.status_code) == (422, 401)


async def test_the_payers_and_the_unfinalized_and_reversed_settlements_say_how_many_they_leave_out(
    local_dashboard: LocalDashboard,
) -> None:
    http, ledger, _ = local_dashboard
    quiet = _section((await http.get(PAGE)).text, "payers")
    for index in range(51):
        await ledger.book_settlement(booking(payer=f"0x{index + 1:040x}", amount=index + 1))
        gone = await ledger.book_settlement(booking(amount=1))
        await ledger.reverse_settlement(gone.id, reason="reorg: gone")

    page = (await http.get(PAGE)).text

    assert "No payer yet." in quiet
    payers = _section(page, "payers")
    assert "The 50 largest totals of 51." in payers and payers.count("data-payer=") == 50
    assert f'data-payer="0x{1:040x}"' not in payers  # the smallest total is the one left out
    assert "The 50 most recent of 51." in _section(page, "unfinalized")
    assert "The 50 most recent of 51." in _section(page, "reversed")
