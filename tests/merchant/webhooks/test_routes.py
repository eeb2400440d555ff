"""The billing API on a real server: per-tenant bearer auth, balances, statements, replay, redelivery."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from a2a_x402.merchant.ledger import Ledger, LedgerReader, balances_json, statement_csv
from a2a_x402.merchant.webhooks import (
    EndpointConfig,
    Outbox,
    WebhookEndpoints,
    create_billing_router,
    generate_secret,
)
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S
from tests.merchant.ledger.bookings import EURC, booking

from .conftest import SQLITE_ONLY

TOKENS = {"acme": "acme-token-0123456789abcdef", "globex": "globex-token-0123456789abcdef"}
ROUTES = [
    ("GET", "/tenants/{tenant}/ledger/balance"),
    ("GET", "/tenants/{tenant}/ledger/statement?format=csv"),
    ("GET", "/tenants/{tenant}/webhooks/events?since_sequence=0"),
    ("POST", "/tenants/{tenant}/webhooks/events/{event}/redeliver"),
    ("GET", "/tenants/{tenant}/limits"),
    ("PUT", "/tenants/{tenant}/limits"),
]


class _Limits:
    """A `TenantLimits` that remembers the last body set per tenant (the real one: tests of `payments`)."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}

    async def describe(self, tenant: str) -> dict[str, object]:
        return {"unpaid": {"of": tenant, "set": self.bodies.get(tenant, b"").decode()}}

    async def set_own(self, tenant: str, body: bytes) -> dict[str, object]:
        if body == b"refused":
            raise _RefusedError("that is not a change of limits")
        self.bodies[tenant] = body
        return await self.describe(tenant)


class _RefusedError(ValueError):
    code = "refused_here"


LIMITS = _Limits()


def _auth(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[tenant]}"}


@pytest.fixture
async def api(database_url: str, asgi_server: Callable[..., str]) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the billing router served by uvicorn over its own engine (on the server's loop)."""
    engine = create_engine(database_url)
    app = FastAPI()
    app.include_router(
        create_billing_router(
            ledger=LedgerReader(engine),
            outbox=Outbox(engine),
            api_token_of=TOKENS.get,
            limits=LIMITS,
        )
    )
    base_url = asgi_server(app, on_exit=engine.dispose)
    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as client:
        yield client


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_every_route_is_closed_to_other_tenants(
    api: httpx.AsyncClient, ledger: Ledger, outbox: Outbox, method: str, path: str
) -> None:
    await ledger.book_settlement(booking())
    [event] = await outbox.events_since("acme")
    url = path.format(tenant="acme", event=event.id)

    attempts = {
        "no token": {},
        "globex's token": _auth("globex"),
        "wrong scheme": {"authorization": f"Basic {TOKENS['acme']}"},
        "a prefix of the token": {"authorization": f"Bearer {TOKENS['acme'][:-1]}"},
    }
    for name, headers in attempts.items():
        response = await api.request(method, url, headers=headers)
        assert response.status_code == 401, name
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["detail"]["code"] == "unauthorized"
    unknown_tenant = await api.request(
        method, path.format(tenant="nobody", event=event.id), headers=_auth("acme")
    )
    assert unknown_tenant.status_code == 401
    assert (await api.request(method, url, headers=_auth("acme"))).status_code in (200, 202)


@SQLITE_ONLY
async def test_the_default_tenant_is_named_default_in_the_paths(
    database_url: str, asgi_server: Callable[..., str], ledger: Ledger
) -> None:
    tokens = {**TOKENS, "": "default-token-0123456789abcdef"}

    def serve(segment: str | None) -> str:
        """A billing router with its own engine, on the server's loop."""
        engine = create_engine(database_url)
        app = FastAPI()
        app.include_router(
            create_billing_router(
                ledger=LedgerReader(engine),
                outbox=Outbox(engine),
                api_token_of=tokens.get,
                default_tenant_segment=segment,
                limits=_Limits(),
            )
        )
        return asgi_server(app, on_exit=engine.dispose)

    await ledger.book_settlement(booking(tenant="", amount=3))
    await ledger.book_settlement(booking(tenant="acme", amount=5))
    default_auth = {"authorization": f"Bearer {tokens['']}"}

    async with httpx.AsyncClient(timeout=HANG_S, base_url=serve("default")) as client:
        balance = await client.get("/tenants/default/ledger/balance", headers=default_auth)
        statement = await client.get("/tenants/default/ledger/statement", headers=default_auth)
        events = await client.get("/tenants/default/webhooks/events", headers=default_auth)
        limits = await client.get("/tenants/default/limits", headers=default_auth)
        with_acme_token = await client.get("/tenants/default/ledger/balance", headers=_auth("acme"))
        empty_segment = await client.get("/tenants//ledger/balance", headers=default_auth)
    async with httpx.AsyncClient(timeout=HANG_S, base_url=serve(None)) as client:
        without_the_name = await client.get("/tenants/default/ledger/balance", headers=default_auth)

    assert balance.status_code == 200
    # Every answer names the default tenant as its path does, never by its empty id.
    assert [answer.json()["tenant"] for answer in (balance, statement, events, limits)] == ["default"] * 4
    # So do the event bodies (webhook receivers read `data.tenant`).
    assert [item["data"]["tenant"] for item in events.json()["events"]] == ["default"]
    assert [item["balance"] for item in balance.json()["balances"]] == ["3"]
    assert with_acme_token.status_code == 401
    assert empty_segment.status_code == 404
    assert without_the_name.status_code == 401  # a router that names no default tenant has none


@SQLITE_ONLY
async def test_a_tenant_sees_only_its_own_rows(
    api: httpx.AsyncClient, ledger: Ledger, outbox: Outbox
) -> None:
    await ledger.book_settlement(booking(tenant="acme", amount=5))
    await ledger.book_settlement(booking(tenant="globex", amount=7))
    [acme_event] = await outbox.events_since("acme")

    balance = (await api.get("/tenants/globex/ledger/balance", headers=_auth("globex"))).json()
    statement = (await api.get("/tenants/globex/ledger/statement", headers=_auth("globex"))).json()
    events = (await api.get("/tenants/globex/webhooks/events", headers=_auth("globex"))).json()
    redeliver = await api.post(
        f"/tenants/globex/webhooks/events/{acme_event.id}/redeliver", headers=_auth("globex")
    )

    assert [item["balance"] for item in balance["balances"]] == ["7"]
    assert [line["amount"] for line in statement["lines"]] == ["7"]
    assert [item["data"]["tenant"] for item in events["events"]] == ["globex"]
    assert redeliver.status_code == 404 and redeliver.json()["detail"]["code"] == "event_not_found"


@SQLITE_ONLY
async def test_balance_and_statements(api: httpx.AsyncClient, ledger: Ledger) -> None:
    first = await ledger.book_settlement(booking(amount=2**100))
    second = await ledger.book_settlement(booking(amount=3, asset=EURC))

    balance = await api.get("/tenants/acme/ledger/balance", headers=_auth("acme"))
    only_eurc = await api.get("/tenants/acme/ledger/balance", params={"asset": EURC}, headers=_auth("acme"))
    csv_all = await api.get("/tenants/acme/ledger/statement?format=csv", headers=_auth("acme"))
    json_window = await api.get(
        "/tenants/acme/ledger/statement",
        params={
            "since": second.booked_at.isoformat(),
            "until": (second.booked_at + timedelta(seconds=1)).isoformat(),
        },
        headers=_auth("acme"),
    )

    assert balance.text == balances_json("acme", await ledger.balance("acme"))
    assert balance.headers["content-type"] == "application/json"
    assert [item["asset"] for item in only_eurc.json()["balances"]] == [EURC]
    assert csv_all.headers["content-type"] == "text/csv; charset=utf-8"
    assert csv_all.content == statement_csv(await ledger.statement("acme")).encode()
    window = json_window.json()
    assert [line["entryId"] for line in window["lines"]] == [second.id] and first.id not in json_window.text
    assert window["since"].endswith("Z")


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"since": "2026-11-30T12:00:00"}, "invalid_booking"),  # naive: refused by the ledger
        ({"format": "xml"}, None),
        ({"until": "yesterday"}, None),
    ],
)
async def test_bad_statement_queries_are_422(
    api: httpx.AsyncClient, query: dict[str, str], code: str | None
) -> None:
    response = await api.get("/tenants/acme/ledger/statement", params=query, headers=_auth("acme"))

    assert response.status_code == 422
    if code is not None:
        assert response.json()["detail"]["code"] == code


async def test_replay_returns_the_delivered_bytes_in_sequence_order(
    api: httpx.AsyncClient, ledger: Ledger, outbox: Outbox
) -> None:
    for _ in range(3):
        await ledger.book_settlement(booking())
    events = await outbox.events_since("acme")

    first = await api.get("/tenants/acme/webhooks/events", params={"limit": 2}, headers=_auth("acme"))
    page = first.json()
    rest = await api.get(
        "/tenants/acme/webhooks/events",
        params={"since_sequence": page["nextSequence"]},
        headers=_auth("acme"),
    )

    assert first.content.startswith(
        b'{"tenant":"acme","events":[' + events[0].payload + b"," + events[1].payload
    )
    assert (page["nextSequence"], page["hasMore"]) == (events[1].sequence, True)
    assert rest.json()["events"] == [json.loads(events[2].payload)]
    assert (rest.json()["nextSequence"], rest.json()["hasMore"]) == (events[2].sequence, False)
    bad = await api.get("/tenants/acme/webhooks/events", params={"since_sequence": -1}, headers=_auth("acme"))
    assert bad.status_code == 422


@SQLITE_ONLY
async def test_redeliver_queues_the_event_again(
    api: httpx.AsyncClient, ledger: Ledger, outbox: Outbox, endpoints: WebhookEndpoints
) -> None:
    await endpoints.sync([EndpointConfig("acme", "https://acme.example/hook", generate_secret())])
    await ledger.book_settlement(booking())
    [event] = await outbox.events_since("acme")

    response = await api.post(f"/tenants/acme/webhooks/events/{event.id}/redeliver", headers=_auth("acme"))
    missing = await api.post("/tenants/acme/webhooks/events/evt_missing/redeliver", headers=_auth("acme"))

    assert response.status_code == 202
    assert response.json() == {"eventId": event.id, "deliveries": 1}
    assert missing.status_code == 404


async def test_a_change_of_limits_is_read_only_up_to_a_kilobyte_and_a_refusal_is_422(
    api: httpx.AsyncClient,
) -> None:
    async def chunked() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"x" * 300

    LIMITS.bodies.clear()
    too_long = await api.put("/tenants/acme/limits", content=b"x" * 1025, headers=_auth("acme"))
    too_long_chunked = await api.put("/tenants/acme/limits", content=chunked(), headers=_auth("acme"))
    refused = await api.put("/tenants/acme/limits", content=b"refused", headers=_auth("acme"))
    at_the_limit = await api.put("/tenants/acme/limits", content=b"x" * 1024, headers=_auth("acme"))

    assert (too_long.status_code, too_long_chunked.status_code) == (413, 413)
    assert too_long.json()["detail"] == {
        "code": "body_too_large",
        "message": "the body must be at most 1024 bytes",
    }
    assert refused.status_code == 422
    assert refused.json()["detail"] == {"code": "refused_here", "message": "that is not a change of limits"}
    assert at_the_limit.status_code == 200
    assert LIMITS.bodies == {"acme": b"x" * 1024}  # only the one accepted reached the limits
