"""CSV exports of what the dashboard shows: the same rows as the page, each tenant's own, formula-guarded."""

from __future__ import annotations

import csv
import io

import httpx
import pytest

from a2a_x402.merchant.dashboard._activity import PayerView, UnpaidView
from a2a_x402.merchant.dashboard._export import payers_csv, settlements_csv, unpaid_csv
from a2a_x402.merchant.dashboard._format import Money
from a2a_x402.merchant.dashboard._views import SettlementView
from a2a_x402.merchant.ledger import LedgerReader
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S

from .conftest import Shop


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


async def _get(shop: Shop, tenant: str, path: str, **params: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        return await http.get(
            shop.dashboard(tenant) + path,
            params=params,
            headers={"authorization": f"Bearer {shop.tokens[tenant]}"},
        )


async def test_the_settlements_page_as_csv_has_the_rows_it_shows(shop: Shop) -> None:
    paid = [await shop.paid_task("globex") for _ in range(2)]
    engine = create_engine(shop.merchant.database_url)
    try:
        [newest, _] = await LedgerReader(engine).settlements("globex")
    finally:
        await engine.dispose()
    every = await _get(shop, "globex", "/settlements.csv")
    older = await _get(shop, "globex", "/settlements.csv", before=str(newest.entry.sequence))
    bad = await _get(shop, "globex", "/settlements.csv", since="yesterday")
    acme = await _get(shop, "acme", "/settlements.csv")
    page = await _get(shop, "globex", "/settlements")

    assert every.status_code == 200 and every.headers["content-type"].startswith("text/csv")
    assert every.headers["content-disposition"] == 'attachment; filename="globex-settlements.csv"'
    rows = _rows(every.text)
    assert [row["task_id"] for row in rows] == paid[::-1]
    assert rows[0]["amount_atomic"] == str(shop.prices["globex"]) and rows[0]["unit"] == "USDC"
    assert rows[0]["tx_hash"] == newest.entry.tx_hash and rows[0]["skill"]
    assert [row["task_id"] for row in _rows(older.text)] == paid[:1]
    assert bad.status_code == 422 and bad.text == "since must be a day written YYYY-MM-DD\n"
    assert _rows(acme.text) == []
    assert 'href="/tenants/globex/dashboard/settlements.csv"' in page.text


async def test_payers_and_refused_payments_as_csv(shop: Shop) -> None:
    await shop.paid_task("globex")
    payers = _rows((await _get(shop, "globex", "/payers.csv")).text)
    unpaid = await _get(shop, "globex", "/unpaid.csv")
    unknown = await _get(shop, "globex", "/secrets.csv")

    assert len(payers) == 1 and payers[0]["settlements"] == "1"
    assert payers[0]["total_atomic"] == str(shop.prices["globex"])
    assert unpaid.status_code == 200 and _rows(unpaid.text) == []
    assert unknown.status_code == 404


@pytest.mark.parametrize("path", ["/settlements.csv", "/payers.csv", "/unpaid.csv"])
async def test_a_stranger_or_another_tenant_gets_no_csv(shop: Shop, path: str) -> None:
    await shop.paid_task("globex")
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        none = await http.get(shop.dashboard("globex") + path)
        other = await http.get(
            shop.dashboard("globex") + path, headers={"authorization": f"Bearer {shop.tokens['acme']}"}
        )
    assert none.status_code == other.status_code == 401
    assert "0x" not in none.text + other.text


_FORMULAS = ['=HYPERLINK("http://evil")', "+1+1", "-2", "@SUM(A1)", "\t=1", " ;=1", "\uff1d1"]


@pytest.mark.parametrize("formula", _FORMULAS)
def test_every_text_cell_is_guarded_against_formulas_and_our_numbers_are_not(formula: str) -> None:
    amount = Money(atomic=-5, text="-0.000005", unit="USDC", display="-$0.000005")
    settlement = SettlementView(
        id=formula,
        task_id=formula,
        state="settled",
        amount=amount,
        payer=formula,
        pay_to=formula,
        network=formula,
        tx_hash=formula,
        block_number=7,
        booked_at=formula,
        effective_at=formula,
        finality=formula,
        reversal_id=None,
        reversal_reason=None,
        skill=formula,
        description=formula,
        ap2_checkout_hash=formula,
        ap2_payment_ref=formula,
        ap2_open_mandate=formula,
    )
    payer = PayerView(payer=formula, network=formula, count=3, total=amount, last_seen=formula)
    unpaid = UnpaidView(
        task_id=formula,
        skill=formula,
        state="failed",
        error=formula,
        reason=formula,
        payer=formula,
        network=None,
        amount=amount,
        at=formula,
    )
    for text, numbers in (
        (settlements_csv([settlement]), {"amount_atomic", "block_number"}),
        (payers_csv([payer]), {"settlements", "total_atomic"}),
        (unpaid_csv([unpaid]), {"amount_atomic"}),
    ):
        [row] = _rows(text)
        for column, cell in row.items():
            if column in numbers:
                assert cell.lstrip("-").isdigit(), (column, cell)
            elif cell not in ("settled", "failed", "USDC", "-0.000005", "-0.000005 USDC"):
                assert cell.startswith("'"), (column, cell)
