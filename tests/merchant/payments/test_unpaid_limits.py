"""A tenant tightens the bounds on its callers' unpaid work itself, through its billing API (issue 25,
point 5): `PUT /tenants/{tenant}/limits`, checked whole against the operator's ceiling, stored
(`tenant_unpaid_limits`, m0013), applied from the next request on and shown by `GET`. Attacks: another
tenant's token, no token, a body too long, negative, huge, fractional and non-numeric values, unknown
fields, two changes racing; each refused with nothing changed, every answer `Cache-Control: no-store`.
Real merchants on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from a2a_x402.merchant.payments import InvalidLimitsError, UnpaidRules
from a2a_x402.merchant.payments._unpaid_limits import (
    OwnLimits,
    OwnLimitStore,
    applied_rules,
    parse_own_limits,
    tenant_limits_table,
)
from a2a_x402.storage import create_engine
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantStarter, MerchantWire, user_message
from tests.fixtures.schema import migration_differences

from .flows import offer
from .test_unpaid import ACME_TOKEN, REFUSED, refused

GLOBEX_TOKEN = "globex-token-0123456789abcdef"  # noqa: S105 (a test value)
CEILING = UnpaidRules(max_awaiting=7, max_per_minute=11, retention_s=900)
LIMITS_PATH = "/tenants/acme/limits"
ACME = {"authorization": f"Bearer {ACME_TOKEN}"}


def _body(**unpaid: object) -> bytes:
    return json.dumps({"unpaid": unpaid}).encode()


# --- the rules of a change, without a server ---


def test_a_change_within_the_ceiling_is_read_and_what_it_leaves_out_is_the_operators() -> None:
    own = parse_own_limits(_body(maxAwaitingPerCaller=2, retentionSeconds=None), CEILING)
    assert own == OwnLimits(max_awaiting=2)
    assert applied_rules(CEILING, own) == UnpaidRules(max_awaiting=2, max_per_minute=11, retention_s=900)
    assert parse_own_limits(_body(), CEILING) == OwnLimits()
    at_the_edges = _body(maxAwaitingPerCaller=7, maxUnpaidPerMinutePerCaller=1, retentionSeconds=300)
    assert parse_own_limits(at_the_edges, CEILING) == OwnLimits(7, 1, 300)


def test_a_ceiling_lowered_later_holds_over_the_tenants_own() -> None:
    own = OwnLimits(max_awaiting=7, max_per_minute=5, retention_s=900)
    lowered = UnpaidRules(max_awaiting=3, max_per_minute=11, retention_s=600)
    assert applied_rules(lowered, own) == UnpaidRules(max_awaiting=3, max_per_minute=5, retention_s=600)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (_body(maxAwaitingPerCaller=-1), "unpaid.maxAwaitingPerCaller must be a whole number from 1 to 7"),
        (_body(maxAwaitingPerCaller=0), "from 1 to 7 (the operator's ceiling) or null, got 0"),
        (_body(maxAwaitingPerCaller=8), "from 1 to 7 (the operator's ceiling) or null, got 8"),
        (
            _body(maxUnpaidPerMinutePerCaller=10**30),
            "from 1 to 11 (the operator's ceiling) or null, got 1e+30",
        ),
        (_body(maxUnpaidPerMinutePerCaller=2**64 - 1), "got 18446744073709551615"),
        (_body(retentionSeconds=299), "unpaid.retentionSeconds must be a whole number from 300 to 900"),
        (_body(retentionSeconds=901), "unpaid.retentionSeconds must be a whole number from 300 to 900"),
        (_body(maxAwaitingPerCaller=2.5), "or null, got 2.5"),
        (_body(maxAwaitingPerCaller=2.0), "or null, got 2.0"),
        (_body(maxAwaitingPerCaller="2"), "or null, got '2'"),
        (_body(maxAwaitingPerCaller=True), "or null, got true"),
        (_body(maxAwaitingPerCaller=[2]), "or null, got [2]"),
        (_body(maxAwaitingPerCaller="x" * 500), "got '" + "x" * 36 + "..."),
        (_body(offerTimeoutSeconds=60), "unknown limit 'offerTimeoutSeconds' in unpaid"),
        (b'{"unpaid": {"maxAwaitingPerCaller": NaN}}', "the body is not JSON"),
        (b'{"unpaid": {"maxAwaitingPerCaller": 1e999}}', "the body is not JSON"),
        (b"", "the body is not JSON"),
        (b"\xff\xfe", "the body is not JSON"),
        (b"[" * 400 + b"]" * 400, "the body must be"),
        (b"[" * 100_000, "the body is not JSON"),  # deeper than any parser should go
        (b'{"maxAwaitingPerCaller": 2}', "the body must be"),
        (b'{"unpaid": {}, "tenant": "globex"}', "the body must be"),
        (b'{"unpaid": 2}', "the body must be"),
    ],
)
def test_a_wrong_change_is_refused_whole_in_one_line(body: bytes, says: str) -> None:
    with pytest.raises(InvalidLimitsError) as refusal:
        parse_own_limits(body, CEILING)
    message = str(refusal.value)
    assert says in message
    assert "\n" not in message and len(message) < 200


# --- the store ---


async def test_the_table_matches_its_migration(database_url: str) -> None:
    assert await migration_differences(database_url, tenant_limits_table.metadata) == []


async def test_a_change_is_seen_by_the_next_read_and_racing_changes_leave_one_whole(
    database_url: str,
) -> None:
    engine = create_engine(database_url)
    try:
        store, elsewhere = OwnLimitStore(engine), OwnLimitStore(engine, ttl_s=0)
        assert await store.get("acme") == OwnLimits()
        await store.put("acme", OwnLimits(max_awaiting=2))
        assert await store.get("acme") == OwnLimits(max_awaiting=2)  # not the cached "none"
        assert await store.get("globex") == OwnLimits()  # one tenant's change is its own
        changes = [OwnLimits(n, n, 300 + n) for n in range(1, 21)]
        # Reads race the writes too: none of them may leave a stale row in the cache.
        await asyncio.gather(
            *(store.put("acme", own) for own in changes), *(store.get("acme") for _ in changes)
        )
        stored = await elsewhere.get("acme")
        assert stored in changes  # one change whole, never a mix of two
        assert await store.get("acme") == stored
        async with engine.connect() as connection:
            rows = (
                await connection.execute(sa.select(sa.func.count()).select_from(tenant_limits_table))
            ).one()
        assert rows == (1,)
    finally:
        await engine.dispose()


# --- the billing API of a real merchant ---


def _tenants_file(tmp_path: Path) -> Path:
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\n\n'
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\napi_token = "{ACME_TOKEN}"\n'
        "max_unpaid_tasks = 7\nunpaid_retention_s = 900\n\n"
        f'[tenants.globex]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\napi_token = "{GLOBEX_TOKEN}"\n'
    )
    return tenants


async def test_a_tenant_sets_its_own_limits_and_the_next_request_obeys_them(
    start_merchant: MerchantStarter, database_url: str, tmp_path: Path
) -> None:
    merchant = start_merchant(database_url, tenants_file=_tenants_file(tmp_path), max_unpaid_per_minute=11)
    async with merchant.http() as http:
        acme = MerchantWire(http, "jsonrpc", "acme")
        await offer(acme)
        changed = await http.put(LIMITS_PATH, content=_body(maxAwaitingPerCaller=2), headers=ACME)
        await offer(acme)  # the second of two
        failure = await refused(acme, user_message())
        shown = await http.get(LIMITS_PATH, headers=ACME)
        # Globex, under the same operator's defaults, is not touched by acme's change.
        globex = MerchantWire(http, "jsonrpc", "globex")
        for _ in range(3):
            await offer(globex)
        cleared = await http.put(LIMITS_PATH, content=_body(), headers=ACME)
        await offer(acme)  # back to the operator's 7

    assert changed.status_code == 200
    assert changed.headers["cache-control"] == "no-store"
    assert failure.reason == REFUSED and "2 tasks awaiting payment" in failure.message
    assert (
        shown.json()
        == changed.json()
        == {
            "tenant": "acme",
            "unpaid": {
                "maxAwaitingPerCaller": 2,
                "maxUnpaidPerMinutePerCaller": 11,
                "retentionSeconds": 900,
                "offerTimeoutSeconds": 300,
            },
            "unpaidCeiling": {
                "maxAwaitingPerCaller": 7,
                "maxUnpaidPerMinutePerCaller": 11,
                "retentionSeconds": 900,
            },
            "unpaidOwn": {
                "maxAwaitingPerCaller": 2,
                "maxUnpaidPerMinutePerCaller": None,
                "retentionSeconds": None,
            },
        }
    )
    assert cleared.json()["unpaid"]["maxAwaitingPerCaller"] == 7


async def test_every_attack_on_the_limits_is_refused_and_changes_nothing(
    start_merchant: MerchantStarter, database_url: str, tmp_path: Path
) -> None:
    merchant = start_merchant(database_url, tenants_file=_tenants_file(tmp_path), max_unpaid_per_minute=11)
    globex = {"authorization": f"Bearer {GLOBEX_TOKEN}"}
    good = _body(maxAwaitingPerCaller=1)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(64):  # no Content-Length: refused as the body arrives
            yield b" " * 64

    async with merchant.http() as http:
        before = (await http.get(LIMITS_PATH, headers=ACME)).json()
        answers = {
            "no token": await http.put(LIMITS_PATH, content=good),
            "globex's token": await http.put(LIMITS_PATH, content=good, headers=globex),
            "a prefix of acme's": await http.put(
                LIMITS_PATH, content=good, headers={"authorization": f"Bearer {ACME_TOKEN[:-1]}"}
            ),
            "too long": await http.put(LIMITS_PATH, content=b" " * 2048 + good, headers=ACME),
            "too long, chunked": await http.put(LIMITS_PATH, content=chunks(), headers=ACME),
            "negative": await http.put(LIMITS_PATH, content=_body(maxAwaitingPerCaller=-5), headers=ACME),
            "huge": await http.put(LIMITS_PATH, content=_body(retentionSeconds=2**70), headers=ACME),
            "above the ceiling": await http.put(
                LIMITS_PATH, content=_body(maxAwaitingPerCaller=8), headers=ACME
            ),
            "fractional": await http.put(LIMITS_PATH, content=_body(maxAwaitingPerCaller=1.5), headers=ACME),
            "a string": await http.put(LIMITS_PATH, content=_body(maxAwaitingPerCaller="1"), headers=ACME),
            "one good, one bad": await http.put(
                LIMITS_PATH, content=_body(maxAwaitingPerCaller=1, retentionSeconds=-1), headers=ACME
            ),
            "not JSON": await http.put(LIMITS_PATH, content=b"max=1", headers=ACME),
        }
        after = (await http.get(LIMITS_PATH, headers=ACME)).json()
        other = await http.get("/tenants/globex/limits", headers=globex)

    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {
        "no token": 401,
        "globex's token": 401,
        "a prefix of acme's": 401,
        "too long": 413,
        "too long, chunked": 413,
        **dict.fromkeys(list(answers)[5:], 422),
    }
    for answer in answers.values():
        assert answer.headers["cache-control"] == "no-store"
    for name in list(answers)[5:]:
        detail = answers[name].json()["detail"]
        assert detail["code"] == "invalid_limits"
        assert "\n" not in detail["message"] and len(detail["message"]) < 200, name
    assert after == before  # nothing changed
    assert other.json()["unpaidOwn"] == dict.fromkeys(before["unpaidOwn"])
    assert await _stored_rows(database_url) == 0


async def test_two_changes_racing_leave_one_of_them_whole(
    start_merchant: MerchantStarter, database_url: str, tmp_path: Path
) -> None:
    merchant = start_merchant(database_url, tenants_file=_tenants_file(tmp_path), max_unpaid_per_minute=11)
    first = {"maxAwaitingPerCaller": 1, "maxUnpaidPerMinutePerCaller": 2, "retentionSeconds": 301}
    second = {"maxAwaitingPerCaller": 6, "maxUnpaidPerMinutePerCaller": 10, "retentionSeconds": 899}
    async with merchant.http() as http:
        answers = await asyncio.gather(
            *(
                http.put(LIMITS_PATH, content=_body(**change), headers=ACME)
                for _ in range(5)
                for change in (first, second)
            )
        )
        shown = (await http.get(LIMITS_PATH, headers=ACME)).json()

    assert {answer.status_code for answer in answers} == {200}
    assert shown["unpaidOwn"] in (first, second)
    assert {key: shown["unpaid"][key] for key in first} == shown["unpaidOwn"]
    assert await _stored_rows(database_url) == 1


async def _stored_rows(database_url: str) -> int:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            count = await connection.execute(sa.select(sa.func.count()).select_from(tenant_limits_table))
            return int(count.scalar_one())
    finally:
        await engine.dispose()
