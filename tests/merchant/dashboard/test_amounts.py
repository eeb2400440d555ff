"""Every amount on the dashboard reads as people write it ($0.010001) and opens to its atomic units and
exact decimals without a script (a `<details>`: a tap on a phone, where no title shows), under the same
strict Content-Security-Policy (no script at all)."""

from __future__ import annotations

from ..ledger.bookings import booking
from .conftest import LOCAL_PAGE, LocalDashboard

_OPENS = (
    '<details class="amount" title="10001 atomic units (0.010001 USDC)" data-atomic="10001">'
    '<summary>$0.010001</summary><span class="atomic">10001 atomic units<br>0.010001 USDC</span></details>'
)


async def test_every_amount_opens_to_its_atomic_units_without_a_script(
    local_dashboard: LocalDashboard,
) -> None:
    http, ledger, _ = local_dashboard
    entry = await ledger.book_settlement(booking(amount=10_001))

    overview = await http.get(LOCAL_PAGE)
    detail = await http.get(f"{LOCAL_PAGE}/settlements/{entry.id}")

    for page in (overview, detail):
        assert page.status_code == 200
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script" not in policy and "<script" not in page.text
        assert _OPENS in page.text
    # Balance, settled in, today, 7 and 30 days, the settlement in two lists, the payer, the chart's table.
    assert overview.text.count(_OPENS) == 9
