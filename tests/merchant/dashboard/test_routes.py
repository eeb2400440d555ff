"""The dashboard over plain HTTP on the real merchant: who sees what, the session cookie, escaping.

Every combination of the URL's tenant (the default tenant, acme, globex, one that does not exist) and the
credential (none, a wrong token, each tenant's token as a bearer, each tenant's session cookie) is tried
on the overview and on every tenant's settlement page: only the URL's own tenant's credential opens it,
and everything else sees the log-in form (401) without a byte of any tenant's data.
"""

from __future__ import annotations

import html
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.callers import CallerKeys
from a2a_x402.merchant.dashboard import SESSION_COOKIE
from a2a_x402.merchant.ledger import LedgerReader
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.payments import submit_directly
from tests.faults.clients import open_task, pay
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.merchant import MerchantStarter, MerchantWire

from .conftest import SEGMENTS, Shop


@dataclass(frozen=True)
class _Paid:
    """What a tenant's dashboard must show, and no other tenant's may."""

    task_id: str
    entry_id: str
    tx_hash: str

    @property
    def marks(self) -> tuple[str, str, str]:
        return (self.task_id, self.entry_id, self.tx_hash)


async def _pay_each_tenant(shop: Shop) -> dict[str, _Paid]:
    task_ids = {tenant: await shop.paid_task(tenant) for tenant in SEGMENTS}
    engine = create_engine(shop.merchant.database_url)
    try:
        reader = LedgerReader(engine)
        paid = {}
        for tenant, task_id in task_ids.items():
            [record] = await reader.settlements(tenant)
            assert record.entry.task_id == task_id
            paid[tenant] = _Paid(task_id, record.entry.id, record.entry.tx_hash)
    finally:
        await engine.dispose()
    return paid


def _client_from(shop: Shop, address: str) -> httpx.AsyncClient:
    """A client of the merchant whose connections come from `address` (any of 127.0.0.0/8)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url, transport=transport)


async def _log_in(http: httpx.AsyncClient, shop: Shop, tenant: str) -> httpx.Response:
    return await http.post(f"{shop.dashboard(tenant)}/login", data={"token": shop.tokens[tenant]})


async def test_only_the_urls_own_tenant_sees_its_dashboard_with_a_token_or_a_session(shop: Shop) -> None:
    paid = await _pay_each_tenant(shop)
    every_mark = [mark for item in paid.values() for mark in item.marks]
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        sessions = {}
        for tenant in SEGMENTS:
            login = await _log_in(http, shop, tenant)
            assert login.status_code == 303, login.text
            sessions[tenant] = login.cookies[SESSION_COOKIE]
        http.cookies.clear()  # from here on, only the credential under test is sent
        credentials: dict[str, tuple[str | None, dict[str, str]]] = {
            "no credential": (None, {}),
            "a wrong token": (None, {"authorization": "Bearer not-a-token-of-anyone"}),
            "a bearer without a token": (None, {"authorization": "Bearer"}),
            "a forged session": (None, {"cookie": f"{SESSION_COOKIE}=99999999999.00"}),
        }
        for tenant, name in SEGMENTS.items():
            credentials[f"{name}'s token"] = (tenant, {"authorization": f"Bearer {shop.tokens[tenant]}"})
            credentials[f"{name}'s session"] = (tenant, {"cookie": f"{SESSION_COOKIE}={sessions[tenant]}"})
        # Each credential from a loopback address of its own: the wrong ones stay under the throttle's
        # count (per tenant and address), so every refusal here is the plain 401.
        clients = {
            credential: _client_from(shop, f"127.0.0.{10 + n}") for n, credential in enumerate(credentials)
        }

        for url_tenant, segment in [*SEGMENTS.items(), ("nosuch", "nosuch")]:
            pages = {"overview": f"/tenants/{segment}/dashboard"}
            pages |= {
                f"{SEGMENTS[owner]}'s settlement": f"/tenants/{segment}/dashboard/settlements/{item.entry_id}"
                for owner, item in paid.items()
            }
            for credential, (holder, headers) in credentials.items():
                for page, path in pages.items():
                    where = f"{path} with {credential}"
                    answer = await clients[credential].get(path, headers=headers)
                    if holder != url_tenant:
                        assert answer.status_code == 401, where
                        assert answer.headers["www-authenticate"] == "Bearer", where
                        assert 'name="token"' in answer.text, where  # the log-in form
                        assert not [mark for mark in every_mark if mark in answer.text], where
                        continue
                    own = paid[url_tenant]
                    others = [
                        mark for owner, item in paid.items() if owner != url_tenant for mark in item.marks
                    ]
                    leaked = [mark for mark in others if mark in answer.text]
                    assert leaked == [], where
                    if page == "overview" or page == f"{segment}'s settlement":
                        assert answer.status_code == 200, where
                        assert all(mark in answer.text for mark in own.marks), where
                    else:
                        assert answer.status_code == 404, where  # another tenant's settlement: not found
        for client in clients.values():
            await client.aclose()


async def test_the_overview_shows_the_amount_in_atomic_units_and_with_the_assets_decimals(shop: Shop) -> None:
    await shop.paid_task("acme")
    price = shop.prices["acme"]  # 100000 atomic units: 0.1 dev USDC (6 decimals)
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        page = await http.get(
            shop.dashboard("acme"), headers={"authorization": f"Bearer {shop.tokens['acme']}"}
        )
    balances = page.text[page.text.index('id="balances"') : page.text.index('id="revenue"')]
    chart = page.text[page.text.index('id="revenue"') : page.text.index('id="settlements"')]

    assert page.status_code == 200
    # Read as $0.10; the exact decimals and the atomic units on demand (the title).
    assert ">$0.10<" in balances and f'title="{price} atomic units (0.{price:06d} USDC)"' in balances
    assert "<svg" in chart and "<rect" in chart and f"({price} atomic units)" in chart
    assert "<script" not in page.text


async def test_the_session_cookie_is_httponly_strict_and_scoped_and_logging_out_ends_it(shop: Shop) -> None:
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        wrong = await http.post(f"{shop.dashboard('acme')}/login", data={"token": shop.tokens["globex"]})
        missing = await http.post(f"{shop.dashboard('acme')}/login", data={})
        unknown = await http.post("/tenants/nosuch/dashboard/login", data={"token": shop.tokens["acme"]})
        login = await _log_in(http, shop, "acme")
        page = await http.get(shop.dashboard("acme"))  # the client's jar sends the cookie back
        session = http.cookies[SESSION_COOKIE]
        logout = await http.post(f"{shop.dashboard('acme')}/logout")
        after = await http.get(shop.dashboard("acme"))
        # The cookie kept from before the log-out opens nothing any more: the session ended on the server.
        replayed = await http.get(shop.dashboard("acme"), headers={"cookie": f"{SESSION_COOKIE}={session}"})

    for refused in (wrong, missing, unknown):
        assert refused.status_code == 401 and "set-cookie" not in refused.headers
        assert "That is not the API token" in refused.text
    assert (login.status_code, login.headers["location"]) == (303, "/tenants/acme/dashboard")
    cookie = login.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    attributes = {part.strip().split("=")[0].lower(): part for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite", "path", "max-age"} <= attributes.keys()
    assert attributes["samesite"].strip().lower() == "samesite=strict"
    assert attributes["path"].strip() == "Path=/tenants/acme/dashboard"
    assert "secure" not in attributes  # served over plain http here; Secure behind an https public URL
    assert shop.tokens["acme"] not in cookie
    assert page.status_code == 200
    assert logout.status_code == 303 and "max-age=0" in logout.headers["set-cookie"].lower()
    assert after.status_code == 401
    assert replayed.status_code == 401 and 'name="token"' in replayed.text


async def test_after_ten_wrong_tokens_for_a_tenant_an_address_gets_429_but_the_right_token_still_works(
    shop: Shop,
) -> None:
    acme = {"authorization": f"Bearer {shop.tokens['acme']}"}
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        login_url = f"{shop.dashboard('acme')}/login"
        wrong = [await http.post(login_url, data={"token": f"guess-{n}"}) for n in range(10)]
        refused = await http.post(f"{shop.dashboard('acme')}/login", data={"token": "guess-10"})
        other_tenant = await http.post(f"{shop.dashboard('globex')}/login", data={"token": "guess"})
        form = await http.get(f"{shop.dashboard('acme')}/login")
        page = await http.get(shop.dashboard("acme"), headers=acme)
        login = await _log_in(http, shop, "acme")  # the right token, from the address refused for wrong ones
    async with _client_from(shop, "127.0.0.2") as elsewhere:
        other_address = await elsewhere.post(f"{shop.dashboard('acme')}/login", data={"token": "guess"})

    assert [answer.status_code for answer in wrong] == [401] * 10
    assert refused.status_code == 429, refused.text
    assert "set-cookie" not in refused.headers
    assert 1 <= int(refused.headers["retry-after"]) <= 300
    assert "Too many failed log-ins" in refused.text
    assert f"try again in {refused.headers['retry-after']} seconds" in refused.text
    assert refused.headers["cache-control"] == "no-store"
    assert "default-src 'none'" in refused.headers["content-security-policy"]
    assert not any(token in refused.text for token in shop.tokens.values())
    # The count is per tenant and address; the form, the right bearer and the right log-in are answered.
    assert (other_tenant.status_code, other_address.status_code) == (401, 401)
    assert (form.status_code, page.status_code) == (200, 200)
    assert login.status_code == 303 and SESSION_COOKIE in login.cookies


async def test_what_comes_from_the_url_is_escaped_and_pages_allow_no_script(shop: Shop) -> None:
    attack = "<img src=x onerror=alert(1)>\"'&"  # no slash: it is one path segment
    acme = {"authorization": f"Bearer {shop.tokens['acme']}"}
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        login = await http.get(f"/tenants/{attack}/dashboard")
        missing = await http.get(f"{shop.dashboard('acme')}/settlements/{attack}", headers=acme)
        style = await http.get("/dashboard/static/dashboard.css")

    assert "&lt;img src=x onerror=alert(1)&gt;&#34;&#39;&amp;" in login.text
    for answer in (login, missing):
        assert "<img" not in answer.text
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["cache-control"] == "no-store"
    assert (login.status_code, missing.status_code) == (401, 404)
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    assert not re.search(r"https?://", style.text)  # nothing fetched from elsewhere


async def test_the_reconcilers_open_differences_reach_only_the_tenant_paid(
    shop: Shop, chain: DevChain
) -> None:
    # acme's payer sends the authorization for acme's terms to the chain itself: no offer was paid with it.
    async with shop.merchant.http() as http:
        _, terms = await open_task(MerchantWire(http, "jsonrpc", "acme"))
    payload = sign_payment(shop.new_payer(), terms)
    submit_directly(chain, payload)
    nonce = payload.payload.authorization.nonce
    headers = {tenant: {"authorization": f"Bearer {shop.tokens[tenant]}"} for tenant in SEGMENTS}

    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:

        async def reported() -> bool:
            page = await http.get(shop.dashboard("acme"), headers=headers["acme"])
            return nonce in _section(page.text, "differences")

        await wait_until(reported, what="the difference on acme's dashboard")
        pages = {
            tenant: await http.get(shop.dashboard(tenant), headers=headers[tenant]) for tenant in SEGMENTS
        }

    differences = _section(pages["acme"].text, "differences")
    assert "no offer was paid with its authorization" in differences and shop.pay_tos["acme"] in differences
    assert "unbooked_payment" in differences and "first seen" in differences and "last seen" in differences
    for tenant in ("", "globex"):
        other = _section(pages[tenant].text, "differences")
        assert nonce not in pages[tenant].text and "None: the records agree" in other, tenant


def _section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}">')
    return html[start : html.index("</section>", start)]


async def test_a_settlement_not_final_yet_awaits_the_reconcilers_check_and_claims_no_missing_depth(
    sqlite_url: str, start_merchant: MerchantStarter, new_payer: Callable[..., str]
) -> None:
    token = f"default-{secrets.token_urlsafe(24)}"
    merchant = start_merchant(sqlite_url, api_token=token, reconcile_interval_s=3600)
    headers = {"authorization": f"Bearer {token}"}
    async with merchant.http() as http:

        async def first_pass_over() -> bool:
            page = await http.get("/tenants/default/dashboard", headers=headers)
            return "last pass" in html.unescape(_section(page.text, "differences"))

        # Paid after the reconciler's first pass, the settlement is deep enough at once (automine, one
        # confirmation) yet stays not final: the next pass is an hour away.
        await wait_until(first_pass_over, what="the reconciler's first pass")
        wire = MerchantWire(http, "jsonrpc", "")
        task_id, terms = await open_task(wire)
        answer = await pay(wire, task_id, sign_payment(new_payer(), terms))
        page = await http.get("/tenants/default/dashboard", headers=headers)

    assert answer["status"]["state"] == "TASK_STATE_COMPLETED", answer["status"]
    unfinalized = html.unescape(_section(page.text, "unfinalized"))
    assert page.status_code == 200 and task_id in unfinalized
    # The dashboard does not read the head: it says what is to come, not that confirmations are missing.
    assert "not final yet: awaiting the reconciler's next check (final at 1 confirmation)" in unfinalized
    assert "awaiting 1 confirmation" not in unfinalized


async def test_the_overview_lists_the_tenants_callers_without_their_keys(shop: Shop, sqlite_url: str) -> None:
    engine = create_engine(sqlite_url)
    try:
        keys = CallerKeys(engine)
        issued = [await keys.create("acme", "alice"), await keys.create("acme", "bob")]
        issued.append(await keys.create("globex", "mallory"))
        await keys.revoke("acme", "bob")
    finally:
        await engine.dispose()
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        page = await http.get(
            shop.dashboard("acme"), headers={"authorization": f"Bearer {shop.tokens['acme']}"}
        )
    callers = page.text[page.text.index('id="callers"') : page.text.index('id="differences"')]

    assert page.status_code == 200
    assert 'data-caller="alice"' in callers and "never" in callers
    assert 'data-caller="bob"' in callers and "revoked" in callers
    assert "mallory" not in page.text
    assert not any(key[6:14] in page.text for key in issued)
