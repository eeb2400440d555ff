"""Issue 25's attacks on the dashboard and the billing API, each against the real merchant on loopback.

A session cookie replayed after log-out, cross-site POSTs to log-in and log-out, 50 wrong bearer tokens
on the dashboard and on the billing API, a `since_sequence` past 64 bits, the interactive API docs, and
cached billing answers: each is refused or contained, and nothing changes for anyone else.
"""

from __future__ import annotations

import httpx

from a2a_x402.merchant.dashboard import SESSION_COOKIE
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import MerchantStarter

from .conftest import Shop

_CROSS_SITE = {
    "another origin": {"origin": "https://evil.example"},
    "a look-alike origin": {"origin": "http://127.0.0.1.evil.example"},
    "origin null": {"origin": "null"},
    "sec-fetch-site cross-site": {"sec-fetch-site": "cross-site"},
    "sec-fetch-site same-site": {"sec-fetch-site": "same-site"},
    "same origin but cross-site fetch": {"origin": "{base}", "sec-fetch-site": "cross-site"},
    "another site's referer": {"referer": "https://evil.example/page"},
}


def _client_from(shop: Shop, address: str) -> httpx.AsyncClient:
    """A client of the merchant whose connections come from `address` (any of 127.0.0.0/8)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url, transport=transport)


def _headers(template: dict[str, str], base: str) -> dict[str, str]:
    return {name: value.format(base=base) for name, value in template.items()}


async def test_cross_site_log_ins_and_log_outs_are_refused_and_change_nothing(shop: Shop) -> None:
    base = shop.merchant.base_url
    login_url, logout_url = f"{shop.dashboard('acme')}/login", f"{shop.dashboard('acme')}/logout"
    async with httpx.AsyncClient(timeout=HANG_S, base_url=base) as http:
        same = {"origin": base, "sec-fetch-site": "same-origin", "referer": base + login_url}
        login = await http.post(login_url, data={"token": shop.tokens["acme"]}, headers=same)
        assert login.status_code == 303, login.text
        session = {"cookie": f"{SESSION_COOKIE}={login.cookies[SESSION_COOKIE]}"}
        http.cookies.clear()
        for name, template in _CROSS_SITE.items():
            headers = _headers(template, base)
            forged_login = await http.post(login_url, data={"token": shop.tokens["acme"]}, headers=headers)
            forged_logout = await http.post(logout_url, headers=headers | session)
            for answer in (forged_login, forged_logout):
                assert answer.status_code == 403, name
                assert "set-cookie" not in answer.headers, name
                assert "sent from another site" in answer.text, name
                assert answer.headers["cache-control"] == "no-store", name
            still = await http.get(shop.dashboard("acme"), headers=session)
            assert still.status_code == 200, name  # the forged log-out ended nothing
        logout = await http.post(logout_url, headers=same | session)
        after = await http.get(shop.dashboard("acme"), headers=session)

    assert logout.status_code == 303
    assert after.status_code == 401


async def test_a_new_log_in_replaces_the_session_the_browser_came_with(shop: Shop) -> None:
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        first = await http.post(f"{shop.dashboard('acme')}/login", data={"token": shop.tokens["acme"]})
        old = first.cookies[SESSION_COOKIE]
        second = await http.post(f"{shop.dashboard('acme')}/login", data={"token": shop.tokens["acme"]})
        new = second.cookies[SESSION_COOKIE]
        http.cookies.clear()
        with_old = await http.get(shop.dashboard("acme"), headers={"cookie": f"{SESSION_COOKIE}={old}"})
        with_new = await http.get(shop.dashboard("acme"), headers={"cookie": f"{SESSION_COOKIE}={new}"})

    assert old != new
    assert (with_old.status_code, with_new.status_code) == (401, 200)


async def test_fifty_wrong_bearer_tokens_on_the_dashboard_get_429_and_the_right_one_still_works(
    shop: Shop,
) -> None:
    async with _client_from(shop, "127.0.0.3") as http:
        answers = [
            await http.get(shop.dashboard("acme"), headers={"authorization": f"Bearer guess-{n}"})
            for n in range(50)
        ]
        right = await http.get(
            shop.dashboard("acme"), headers={"authorization": f"Bearer {shop.tokens['acme']}"}
        )
        billing_wrong = await http.get(
            "/tenants/acme/ledger/balance", headers={"authorization": "Bearer guess"}
        )
        globex_wrong = await http.get(shop.dashboard("globex"), headers={"authorization": "Bearer guess"})

    codes = [answer.status_code for answer in answers]
    assert codes == [401] * 10 + [429] * 40
    assert all(1 <= int(answer.headers["retry-after"]) <= 300 for answer in answers[10:])
    assert not any(token in answer.text for answer in answers for token in shop.tokens.values())
    assert right.status_code == 200 and 'name="token"' not in right.text  # the page, not the form
    assert billing_wrong.status_code == 429  # one count for the tenant's every surface
    assert globex_wrong.status_code == 401  # and one per tenant


async def test_fifty_wrong_bearer_tokens_on_the_billing_api_get_429_and_the_right_one_still_works(
    shop: Shop,
) -> None:
    async with _client_from(shop, "127.0.0.4") as http:
        answers = [
            await http.get("/tenants/acme/ledger/balance", headers={"authorization": f"Bearer guess-{n}"})
            for n in range(25)
        ]
        answers += [
            await http.get("/tenants/acme/webhooks/events", headers={"authorization": f"Bearer guess-{n}"})
            for n in range(25)
        ]
        right = await http.get(
            "/tenants/acme/ledger/balance", headers={"authorization": f"Bearer {shop.tokens['acme']}"}
        )
        # Made-up tenants share one count: cycling names neither dodges the throttle nor grows its table.
        made_up = [
            await http.get(f"/tenants/nosuch{n}/ledger/balance", headers={"authorization": "Bearer guess"})
            for n in range(11)
        ]
    async with _client_from(shop, "127.0.0.5") as elsewhere:
        other_address = await elsewhere.get(
            "/tenants/acme/ledger/balance", headers={"authorization": "Bearer guess"}
        )

    codes = [answer.status_code for answer in answers]
    assert codes == [401] * 10 + [429] * 40
    assert answers[-1].json()["detail"]["code"] == "too_many_failures"
    assert 1 <= int(answers[-1].headers["retry-after"]) <= 300
    assert right.status_code == 200, right.text
    assert [answer.status_code for answer in made_up] == [401] * 10 + [429]
    assert other_address.status_code == 401


async def test_integer_query_parameters_out_of_range_are_422_never_a_500(shop: Shop) -> None:
    acme = {"authorization": f"Bearer {shop.tokens['acme']}"}
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url, headers=acme) as http:
        answers = {
            value: await http.get("/tenants/acme/webhooks/events", params={"since_sequence": value})
            for value in (str(2**70), str(2**63), "-1", "1e3", str(2**63 - 1), "0")
        }
        limits = {
            value: await http.get("/tenants/acme/webhooks/events", params={"limit": value})
            for value in (str(2**70), "0", "1001")
        }
        # Times too: one that is year 10000 in UTC, one before year 1, one that is no time at all.
        times = {
            value: await http.get("/tenants/acme/ledger/statement", params={"since": value, "until": value})
            for value in ("9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", str(2**70))
        }

    assert {value: answer.status_code for value, answer in answers.items()} == {
        str(2**70): 422,
        str(2**63): 422,
        "-1": 422,
        "1e3": 422,
        str(2**63 - 1): 200,
        "0": 200,
    }
    assert all(answer.status_code == 422 for answer in limits.values())
    assert {value: answer.status_code for value, answer in times.items()} == dict.fromkeys(times, 422)
    assert answers[str(2**63 - 1)].json()["events"] == []


async def test_billing_answers_are_never_stored_and_no_api_docs_are_served(shop: Shop) -> None:
    acme = {"authorization": f"Bearer {shop.tokens['acme']}"}
    async with httpx.AsyncClient(timeout=HANG_S, base_url=shop.merchant.base_url) as http:
        answers = [
            await http.get("/tenants/acme/ledger/balance", headers=acme),
            await http.get("/tenants/acme/ledger/statement", params={"format": "csv"}, headers=acme),
            await http.get("/tenants/acme/ledger/statement", headers=acme),
            await http.get("/tenants/acme/webhooks/events", headers=acme),
            await http.get("/tenants/acme/webhooks/events", params={"since_sequence": "x"}, headers=acme),
            await http.get("/tenants/acme/ledger/balance"),
            await http.post("/tenants/acme/webhooks/events/nosuch/redeliver", headers=acme),
            await http.get(f"{shop.dashboard('acme')}/login"),
        ]
        docs = {path: (await http.get(path)).status_code for path in ("/docs", "/redoc", "/openapi.json")}

    assert [answer.status_code for answer in answers] == [200, 200, 200, 200, 422, 401, 404, 200]
    assert all(answer.headers["cache-control"] == "no-store" for answer in answers)
    assert docs == {"/docs": 404, "/redoc": 404, "/openapi.json": 404}


async def test_x402_api_docs_serves_the_schema_alone(
    sqlite_url: str, start_merchant: MerchantStarter
) -> None:
    merchant = start_merchant(sqlite_url, api_docs=True)
    async with httpx.AsyncClient(timeout=HANG_S, base_url=merchant.base_url) as http:
        schema = await http.get("/openapi.json")
        docs = {path: (await http.get(path)).status_code for path in ("/docs", "/redoc")}

    assert schema.status_code == 200 and "/tenants/{tenant}/ledger/balance" in schema.json()["paths"]
    assert docs == {"/docs": 404, "/redoc": 404}
