"""The dashboard's differences page on the real merchant (its reconciler passing every half second): a
payment no offer explains to a tenant's payee is listed there until the tenant books or acknowledges it
from the page's form; another tenant, a request without credentials, a cross-site POST, a bad note, a
replayed form and an unknown id are refused and change nothing. The overview lists the stored open
differences too: one stays listed after passes that no longer see it, until it is closed. A difference
about the chain itself (unreadable, restarted), stored with no tenant or payTo, is shown to every tenant
in words about the chain, without a form: the operator closes it."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.dashboard import DashboardData
from a2a_x402.merchant.dashboard._differences import shown_detail
from a2a_x402.merchant.dashboard._format import format_time
from a2a_x402.merchant.dashboard._routes import templates_for
from a2a_x402.merchant.differences import (
    MAX_NOTE_CHARS,
    DifferenceNotOpenError,
    DifferenceState,
    DifferenceStore,
    Sighting,
)
from a2a_x402.merchant.ledger import LedgerReader
from a2a_x402.merchant.webhooks import Outbox, WebhookEndpoints
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.payments import submit_directly
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantStarter, ledger_entries
from tests.fixtures.servers import free_port
from tests.merchant.differences.helpers import Passes, unexplained_payment

from .conftest import Shop


def _bearer(shop: Shop, tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {shop.tokens[tenant]}"}


async def _stored(shop: Shop) -> dict[int, tuple[DifferenceState, str | None]]:
    engine = create_engine(shop.merchant.database_url)
    try:
        listed = await DifferenceStore(engine).listed(states=tuple(DifferenceState))
    finally:
        await engine.dispose()
    return {d.id: (d.state, d.pay_to) for d in listed}


async def test_a_tenant_books_and_acknowledges_its_differences_and_nobody_else_can(
    shop: Shop, chain: DevChain
) -> None:
    for tenant in ("acme", "globex"):
        requirements = make_requirements(chain, pay_to=shop.pay_tos[tenant], amount=shop.prices[tenant])
        submit_directly(chain, sign_payment(shop.new_payer(), requirements))
    chain.rpc.call("evm_mine")
    base = shop.merchant.base_url
    same_site = {"origin": base, "sec-fetch-site": "same-origin"}
    acme_page, globex_page = (
        f"{shop.dashboard('acme')}/differences",
        f"{shop.dashboard('globex')}/differences",
    )
    async with httpx.AsyncClient(timeout=HANG_S, base_url=base) as http:

        async def listed(page: str, tenant: str) -> list[int]:
            answer = await http.get(page, headers=_bearer(shop, tenant))
            assert answer.status_code == 200, answer.text
            opened = answer.text.split('id="closed-differences"')[0]
            return [int(n) for n in re.findall(r'id="difference-(\d+)"', opened)]

        async def both_listed() -> bool:
            return bool(await listed(acme_page, "acme")) and bool(await listed(globex_page, "globex"))

        await wait_until(both_listed, what="the reconciler stored both payments")
        (acme_id,) = await listed(acme_page, "acme")
        (globex_id,) = await listed(globex_page, "globex")
        overview = await http.get(shop.dashboard("acme"), headers=_bearer(shop, "acme"))
        before = await _stored(shop)

        def form(action: str, note: str = "paid by hand") -> dict[str, str]:
            return {"action": action, "note": note}

        acme_post = f"{acme_page}/{acme_id}"
        refused = {
            "no credentials": await http.post(acme_post, data=form("book"), headers=same_site),
            "another tenant's token": await http.post(
                acme_post, data=form("book"), headers=same_site | _bearer(shop, "globex")
            ),
            "another tenant's difference": await http.post(
                f"{globex_page}/{acme_id}", data=form("ack"), headers=same_site | _bearer(shop, "globex")
            ),
            "cross-site": await http.post(
                acme_post,
                data=form("book"),
                headers={"origin": "https://evil.example"} | _bearer(shop, "acme"),
            ),
            "blank note": await http.post(
                acme_post, data=form("book", "  "), headers=same_site | _bearer(shop, "acme")
            ),
            "oversized note": await http.post(
                acme_post,
                data=form("ack", "x" * (MAX_NOTE_CHARS + 1)),
                headers=same_site | _bearer(shop, "acme"),
            ),
            "no action": await http.post(acme_post, data=form(""), headers=same_site | _bearer(shop, "acme")),
            "unknown id": await http.post(
                f"{acme_page}/999999", data=form("ack"), headers=same_site | _bearer(shop, "acme")
            ),
            "another tenant's payment booked": await http.post(
                f"{acme_page}/{globex_id}", data=form("book"), headers=same_site | _bearer(shop, "acme")
            ),
        }
        unchanged = await _stored(shop)
        stranger_view = await http.get(acme_page, headers=_bearer(shop, "globex"))
        booked = await http.post(acme_post, data=form("book"), headers=same_site | _bearer(shop, "acme"))
        replay = await http.post(acme_post, data=form("book"), headers=same_site | _bearer(shop, "acme"))
        acked = await http.post(
            f"{globex_page}/{globex_id}",
            data=form("ack", "a test"),
            headers=same_site | _bearer(shop, "globex"),
        )
        after = await http.get(acme_page, headers=_bearer(shop, "acme"))
        after_ids = await listed(acme_page, "acme")
    stored = await _stored(shop)

    assert f'href="{shop.dashboard("acme")}/differences"' in overview.text
    statuses = {name: answer.status_code for name, answer in refused.items()}
    assert statuses == {
        "no credentials": 401,
        "another tenant's token": 401,
        "another tenant's difference": 404,
        "cross-site": 403,
        "blank note": 400,
        "oversized note": 400,
        "no action": 400,
        "unknown id": 404,
        "another tenant's payment booked": 404,
    }, statuses
    assert "a note is required" in refused["blank note"].text
    assert unchanged == before and before[acme_id][0] is DifferenceState.OPEN
    assert stranger_view.status_code == 401 and str(acme_id) not in re.findall(
        r"difference-(\d+)", stranger_view.text
    )
    assert (booked.status_code, booked.headers["location"]) == (303, acme_page)
    assert replay.status_code == 404 and acked.status_code == 303
    assert (stored[acme_id][0], stored[globex_id][0]) == (
        DifferenceState.BOOKED,
        DifferenceState.ACKNOWLEDGED,
    )
    (entry,) = await ledger_entries(shop.merchant.database_url, tenant="acme")
    assert (entry.pay_to, entry.amount, entry.task_id) == (
        shop.pay_tos["acme"],
        shop.prices["acme"],
        f"difference-{acme_id}",
    )
    assert after_ids == [] and "booked by dashboard:acme" in after.text and "paid by hand" in after.text


async def test_the_overview_lists_a_stored_difference_after_passes_that_no_longer_see_it_until_closed(
    database_url: str, chain: DevChain, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    settings, nonce = await unexplained_payment(database_url, chain, start_merchant, new_payer)
    passes = Passes(settings)
    data = DashboardData(
        ledger=LedgerReader(passes.engine),
        outbox=Outbox(passes.engine),
        endpoints=WebhookEndpoints(passes.engine),
        reconciler=passes.reconciler,
        assets={},
        confirmations=1,
        differences=passes.store,
    )
    try:
        await passes.run()
        # Deeper than confirmations + the reorg margin: the passes after the next do not read its block.
        chain.rpc.call("anvil_mine", [hex(200)])
        later = [await passes.run() for _ in range(3)]
        listed = await data.overview("", DEFAULT_PAY_TO)
        other = await data.overview("acme", PAY_TO)
        (stored,) = await passes.all()
        await passes.store.close(stored.id, DifferenceState.ACKNOWLEDGED, note="refunded by hand", by="test")
        closed = await data.overview("", DEFAULT_PAY_TO)
    finally:
        await passes.aclose()

    assert [len(report.differences) for report in later] == [1, 0, 0]
    (shown,) = listed.differences
    assert (shown.id, shown.kind) == (stored.id, "unbooked_payment") and nonce in shown.detail
    assert shown.first_seen == format_time(stored.first_seen)
    assert shown.last_seen == format_time(stored.last_seen)
    assert listed.reconciled_at is not None
    assert other.differences == () and closed.differences == ()


async def test_a_chain_that_cannot_be_read_or_restarted_is_shown_to_every_tenant_as_about_the_chain(
    sqlite_url: str, chain: DevChain, start_merchant: MerchantStarter
) -> None:
    merchant = start_merchant(sqlite_url)
    merchant.stop()
    dead_node = f"http://127.0.0.1:{free_port()}"
    passes = Passes(merchant.settings.model_copy(update={"rpc_url": dead_node}))
    data = DashboardData(
        ledger=LedgerReader(passes.engine),
        outbox=Outbox(passes.engine),
        endpoints=WebhookEndpoints(passes.engine),
        reconciler=passes.reconciler,
        assets={},
        confirmations=1,
        differences=passes.store,
    )
    try:
        report = await passes.run()
        # A restart as the reconciler stores it: its text counts every tenant's differences it closed.
        await passes.store.sighted(
            [
                Sighting(
                    kind="chain_restarted",
                    key="0x" + "ab" * 32,
                    detail=f"the chain restarted: genesis block 0x{'ab' * 32} (was 0x{'cd' * 32}); 7 open "
                    "differences about the old chain closed",
                )
            ]
        )
        views = {
            tenant: await data.overview(tenant, pay_to)
            for tenant, pay_to in (("", DEFAULT_PAY_TO), ("acme", PAY_TO))
        }
        stored = await passes.all()
        with pytest.raises(DifferenceNotOpenError):  # a tenant does not close what concerns every tenant
            await passes.store.close(
                stored[0].id,
                DifferenceState.ACKNOWLEDGED,
                note="not mine",
                by="acme",
                tenant_or_payee=("acme", PAY_TO),
            )
    finally:
        await passes.aclose()
    templates = templates_for({})
    overview = templates.get_template("overview.html").render(
        stylesheet="/dashboard.css", segment="acme", tenant="acme", view=views["acme"], signed_in=True
    )
    page = templates.get_template("differences.html").render(
        stylesheet="/dashboard.css",
        segment="acme",
        tenant="acme",
        opened=stored,
        closed=[],
        bookable=lambda d: False,
        detail=shown_detail,
        error=None,
        signed_in=True,
    )

    assert {d.kind for d in report.differences} == {"chain_unavailable"}
    assert [(d.kind, d.tenant, d.pay_to) for d in stored] == [
        ("chain_unavailable", None, None),
        ("chain_restarted", None, None),
    ]
    for view in views.values():
        unavailable, restarted = view.differences
        assert [unavailable.kind, restarted.kind] == ["chain_unavailable", "chain_restarted"]
        assert unavailable.about_chain and restarted.about_chain
        assert unavailable.detail.startswith("The merchant could not read the chain (last tried ")
        assert restarted.detail.startswith(f"The chain was restarted at {format_time(stored[1].first_seen)}")
        for shown in (unavailable, restarted):
            assert "This is about the chain, not your money" in shown.detail
            # The operator's text names the node and counts other tenants' differences: not a tenant's.
            assert dead_node not in shown.detail and "7 open" not in shown.detail
    assert "None: the records agree" not in overview and overview.count("· about the chain ·") == 2
    assert "This is about the chain, not your money" in page
    assert "/dashboard/differences/" not in page  # no form: the operator closes them
