"""The dashboard in a real headless Chromium, with JavaScript switched off: log in, watch a paid task
appear, see its webhook delivery fail and be retried, follow the settlement to its page.

The merchant is the real one (`build_app` on the test chain); the task is paid over A2A by a real payer
while the browser looks. acme's webhook receiver on 127.0.0.1 answers the first delivery with 500, then
holds the retry until the browser has seen the failure, then accepts it. Screenshots of every step are
kept in `test-artifacts/<test name>/` (the test prints the folder).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.dashboard import SESSION_COOKIE
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import submit_directly
from tests.faults.clients import open_task, pay
from tests.fixtures.deadlines import wait_until
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.merchant import MerchantWire

from .conftest import Shop

if TYPE_CHECKING:  # imported by the `browser` fixture, which skips (or fails under CI) without it
    from playwright.async_api import Browser, Locator, Page


async def _reload_until(page: Page, condition: Callable[[], Awaitable[bool]], *, what: str) -> None:
    async def reloaded() -> bool:
        # A reload sent while a navigation (a click's) is still loading can reach a frame Chromium is
        # swapping out ("Not attached to an active page"): each reload starts from a loaded page.
        await page.wait_for_load_state("load")
        await page.reload()
        return await condition()

    await wait_until(reloaded, what=what)


async def _delivery_state(page: Page) -> tuple[str, str, str]:
    """The first delivery row's (status, attempts, last answer), or empty strings when there is none."""
    row = page.locator("#webhooks tr[data-delivery]").first
    if await row.count() == 0:
        return "", "", ""
    cells = await row.locator("td").all_inner_texts()
    return cells[2].strip(), cells[3].strip(), cells[4].strip()


async def test_log_in_see_a_paid_task_its_failed_and_retried_webhook_and_follow_the_settlement(
    browser: Browser, shop: Shop, artifacts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print(f"\ndashboard screenshots: {artifacts}")
    context = await browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    dashboard = shop.merchant.base_url + shop.dashboard("acme")
    try:
        # Log in.
        first = await page.goto(dashboard)
        assert first is not None and first.status == 401
        await page.screenshot(path=artifacts / "01-login.png", full_page=True)
        await page.fill("#token", shop.tokens["globex"])  # another tenant's token is refused
        await page.click("form.login button[type=submit]")
        assert await page.locator(".error").inner_text() == "That is not the API token of tenant acme."
        await page.fill("#token", shop.tokens["acme"])
        await page.click("form.login button[type=submit]")
        assert page.url == dashboard
        assert await page.locator("#settlements .empty").inner_text() == "No settlements yet."
        [cookie] = [cookie for cookie in await context.cookies() if cookie["name"] == SESSION_COOKIE]
        assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (
            True,
            "Strict",
            "/tenants/acme/dashboard",
        )
        await page.screenshot(path=artifacts / "02-logged-in.png", full_page=True)

        # A task is paid while the page is open; a reload shows it.
        task_id = await shop.paid_task("acme")
        row = page.locator("#settlements tr[data-settlement]").first

        async def task_shown() -> bool:
            return await row.count() == 1 and task_id in await row.inner_text()

        await _reload_until(page, task_shown, what="the paid task on the dashboard")
        price = shop.prices["acme"]
        assert f"${price / 10**6:.2f}" in await page.locator("#balances").inner_text()  # $0.10
        assert await page.locator("#revenue svg.wide rect.bar").count() == 1

        # Its settlement.completed delivery failed (HTTP 500) and waits for its retry.
        await wait_until(lambda: len(shop.receiver.received) >= 1, what="the first delivery attempt")
        shop.receiver.arrived.clear()
        shop.receiver.holding = True  # the retry, due 5 s after the failure, waits until released

        async def failure_shown() -> bool:
            status, attempts, answer = await _delivery_state(page)
            return status == "pending" and answer == "HTTP 500" and attempts in ("1", "2")

        await _reload_until(page, failure_shown, what="the failed delivery on the dashboard")
        next_retry = await page.locator("#webhooks tr[data-delivery] td").nth(5).inner_text()
        assert next_retry.strip().startswith("20")  # a time, not "-": it will be retried
        await page.screenshot(path=artifacts / "03-paid-and-delivery-failed.png", full_page=True)
        # Released as soon as it is seen: a worker gives up on an attempt after 15 s (and would retry it only
        # 5 min later), counted from its arrival, not from this wait's start.
        await wait_until(shop.receiver.arrived.is_set, what="the retry to arrive")
        shop.receiver.released.set()

        async def retried() -> bool:
            return (await _delivery_state(page))[:2] == ("delivered", "2")

        await _reload_until(page, retried, what="the retried delivery on the dashboard")
        await page.locator("#webhooks details summary").first.click()  # native <details>: no script needed
        attempts = page.locator("#webhooks table.attempts tbody tr")
        logged = [
            " ".join((await attempts.nth(i).inner_text()).split()) for i in range(await attempts.count())
        ]
        assert len(logged) == 2
        assert logged[0].startswith("2 ") and "delivered HTTP 200" in logged[0]
        assert logged[1].startswith("1 ") and "retry HTTP 500" in logged[1]
        await page.screenshot(path=artifacts / "04-delivery-retried.png", full_page=True)

        # Follow the settlement to its own page; it becomes final at the configured depth.
        entry_id = await row.get_attribute("data-settlement")
        await row.locator("a").first.click()
        assert page.url == f"{dashboard}/settlements/{entry_id}"

        async def final() -> bool:
            return (await page.locator("dl.settlement dd").nth(0).inner_text()).strip() == "finalized"

        await _reload_until(page, final, what="the settlement to be final")
        details = await page.locator("dl.settlement").inner_text()
        assert task_id in details and f"${price / 10**6:.2f}" in details
        amount = page.locator("dl.settlement .amount")
        assert await amount.get_attribute("title") == f"{price} atomic units (0.{price:06d} USDC)"
        # The atomic units on demand, with no script (the page may run none): the amount opens to them.
        atomic = amount.locator(".atomic")
        assert not await atomic.is_visible()
        await amount.locator("summary").click()
        assert await atomic.inner_text() == f"{price} atomic units\n0.{price:06d} USDC"
        assert "marked by the reconciler (1 confirmation required)" in details and "final at" not in details
        events = await page.locator("#events ul.events").inner_text()
        assert "settlement.completed" in events and "settlement.finalized" in events
        await page.screenshot(path=artifacts / "05-settlement.png", full_page=True)

        # Logging out leaves nothing of the tenant on screen.
        await page.goto(dashboard)
        await page.click("header form button[type=submit]")
        assert page.url == f"{dashboard}/login"
        again = await page.goto(dashboard)
        assert again is not None and again.status == 401
        assert task_id not in await page.content()
    finally:
        shop.receiver.released.set()
        await context.close()
    kept = await asyncio.to_thread(lambda: sorted(path.name for path in artifacts.iterdir()))
    assert kept == [
        "01-login.png",
        "02-logged-in.png",
        "03-paid-and-delivery-failed.png",
        "04-delivery-retried.png",
        "05-settlement.png",
    ]


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
async def test_the_pages_fit_the_screen_without_horizontal_scroll_at_desktop_and_phone_widths(
    browser: Browser, shop: Shop, chain: DevChain, artifacts: Path, width: int
) -> None:
    for _ in range(2):
        await shop.paid_task("acme")
    async with shop.merchant.http() as http:  # and one refused: its payer holds nothing
        wire = MerchantWire(http, "jsonrpc", "acme")
        task_id, terms = await open_task(wire)
        await pay(wire, task_id, sign_payment(shop.new_payer(0), terms))
    # And a payment no offer explains, sent to the chain directly: an open difference with its long hex.
    requirements = make_requirements(chain, pay_to=shop.pay_tos["acme"], amount=shop.prices["acme"])
    submit_directly(chain, sign_payment(shop.new_payer(), requirements))
    context = await browser.new_context(
        java_script_enabled=False,
        viewport={"width": width, "height": 900},
        extra_http_headers={"authorization": f"Bearer {shop.tokens['acme']}"},
    )
    page = await context.new_page()
    dashboard = shop.merchant.base_url + shop.dashboard("acme")
    try:
        await page.goto(dashboard)

        async def difference_listed() -> bool:
            return await page.locator("#differences li[id^=open-difference-]").count() == 1

        await _reload_until(page, difference_listed, what="the open difference on the overview")
        assert await page.locator("#settlements tr[data-settlement]").count() == 2
        assert await page.locator(f'#unpaid tr[data-task="{task_id}"]').count() == 1
        await _assert_fits(page, width)
        # The chart scales to its card (a phone gets one drawn for its size): today's bar is on screen.
        shown = "compact" if width < 720 else "wide"
        assert await page.locator(f"#revenue svg.{shown}").is_visible()
        assert not await page.locator(f"#revenue svg:not(.{shown})").is_visible()
        chart = await page.locator(f"#revenue svg.{shown}").bounding_box()
        assert chart is not None and chart["x"] >= 0 and chart["x"] + chart["width"] <= width
        assert chart["width"] >= 0.8 * (width - 40)  # the card's width, not 60 % of it
        bar = await page.locator(f"#revenue svg.{shown} rect.bar").last.bounding_box()
        assert bar is not None and bar["x"] + bar["width"] <= width
        # A payer's address is drawn short (0x1234…abcd) and copied whole.
        payer = page.locator("#settlements tr[data-settlement] .hex").first
        full = await payer.get_attribute("title")
        assert full is not None and await payer.text_content() == full
        box = await payer.bounding_box()
        assert box is not None and box["width"] < 150
        await page.screenshot(path=artifacts / f"overview-{width}.png", full_page=True)
        for section in ("totals", "unpaid", "payers", "differences"):
            await page.locator(f"#{section}").screenshot(path=artifacts / f"{section}-{width}.png")

        await page.goto(f"{dashboard}/differences")
        assert await page.locator("#open-differences li[id^=difference-]").count() == 1
        await _assert_fits(page, width)
        await page.screenshot(path=artifacts / f"differences-page-{width}.png", full_page=True)

        await page.goto(dashboard)
        await _follow(page, page.locator("#settlements tr[data-settlement] a").first)
        await _assert_fits(page, width)
        await page.screenshot(path=artifacts / f"settlement-{width}.png", full_page=True)

        # Every settlement, filtered to today by the form (no script: a GET with the fields).
        await page.goto(f"{dashboard}/settlements")
        await page.fill("input[name=since]", datetime.now(UTC).date().isoformat())
        await _follow(page, page.locator("form.filter button[type=submit]"))
        assert "since=" in page.url
        assert await page.locator("#settlements tr[data-settlement]").count() == 2
        await _assert_fits(page, width)
        await page.screenshot(path=artifacts / f"settlements-{width}.png", full_page=True)
    finally:
        await context.close()


async def _follow(page: Page, link: Locator) -> None:
    """Click a link or submit button and wait for the page it loads.

    A bare click may return while Chromium swaps the document, so the next evaluate could find none.
    """
    async with page.expect_navigation(wait_until="load"):
        await link.click()


async def _assert_fits(page: Page, width: int) -> None:
    scroll_width = await page.evaluate("document.documentElement.scrollWidth")
    inner_width = await page.evaluate("window.innerWidth")
    assert inner_width == width and scroll_width <= inner_width, (page.url, scroll_width, inner_width)
