"""Unpaid work, bounded, against the reference merchant on SQLite and PostgreSQL: per caller, a priced task
over the number awaiting payment or over the minute's rate is refused before anything is stored (every
binding); a tenant's own limit applies to it alone; expired offers no longer count; the purge deletes the
tasks unpaid past their retention with their offers and callers, in one transaction per batch, and never
a task whose payment is being taken or was paid."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.context import ServerCallContext
from sqlalchemy.ext.asyncio import AsyncConnection

from a2a_x402.merchant.payments import (
    CLIENT_ADDRESS_KEY,
    OfferState,
    PurgeReport,
    UnpaidLimitError,
    UnpaidRules,
    UnpaidWork,
    caller_of,
)
from a2a_x402.merchant.payments._unpaid import offer_callers_table
from a2a_x402.merchant.tenants import TenantRegistry
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import (
    BINDINGS,
    DEFAULT_PAY_TO,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    rejection_message,
    user_message,
)

from .flows import JSON, offer

REFUSED = "UNSUPPORTED_OPERATION"
RULES = UnpaidRules(max_awaiting=2, max_per_minute=100, retention_s=3600)
ACME_TOKEN = "acme-token-0123456789abcdef"  # noqa: S105 (a test value)


async def counts(database_url: str) -> tuple[int, int, int]:
    """(tasks, offers, offer callers) stored."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            found = [
                (
                    await connection.execute(sa.select(sa.func.count()).select_from(sa.table(name)))
                ).scalar_one()
                for name in ("tasks", "payment_offers", "payment_offer_callers")
            ]
            return found[0], found[1], found[2]
    finally:
        await engine.dispose()


async def _count(connection: AsyncConnection, table: str) -> int:
    result = await connection.execute(sa.select(sa.func.count()).select_from(sa.table(table)))
    return int(result.scalar_one())


async def refused(wire: MerchantWire, message: JSON) -> A2ACallError:
    with pytest.raises(A2ACallError) as failure:
        await wire.send(message)
    assert failure.value.reason == REFUSED
    return failure.value


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_caller_over_its_awaiting_tasks_is_refused_and_nothing_is_stored(
    start_merchant: MerchantStarter, database_url: str, binding: str
) -> None:
    merchant = start_merchant(database_url, max_unpaid_tasks=2, max_unpaid_per_minute=100)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        first = await offer(wire)
        await offer(wire)
        failure = await refused(wire, user_message())
        assert "2 tasks awaiting payment" in failure.message
        assert await counts(database_url) == (2, 2, 2)
        # Rejecting one frees its place.
        await wire.send(rejection_message(first["id"]))
        await offer(wire)
        assert await counts(database_url) == (3, 3, 3)


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
async def test_concurrent_requests_of_one_caller_are_admitted_exactly_up_to_the_limit(
    start_merchant: MerchantStarter, database_url: str, binding: str
) -> None:
    # The count and the place taken are one transaction: requests in flight cannot all see room.
    limit, sent = 3, 12
    merchant = start_merchant(database_url, max_unpaid_tasks=limit, max_unpaid_per_minute=100)
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        answers = await asyncio.gather(
            *(wire.send(user_message()) for _ in range(sent)), return_exceptions=True
        )
    admitted = [answer for answer in answers if isinstance(answer, dict)]
    refusals = [answer for answer in answers if isinstance(answer, A2ACallError)]
    assert len(admitted) == limit, answers
    assert len(refusals) == sent - limit, answers
    assert all(failure.reason == REFUSED for failure in refusals)
    for answer in admitted:
        assert answer["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    # Each place taken became its task's caller row: no reservation is left behind.
    assert await counts(database_url) == (limit, limit, limit)
    assert all(not task_id.startswith("admit:") for _, task_id in await _callers(database_url))


async def test_concurrent_admissions_take_exactly_the_places_left(database_url: str) -> None:
    rules = UnpaidRules(max_awaiting=5, max_per_minute=100, retention_s=3600)
    async with _unpaid(database_url, rules) as unpaid:
        results = await asyncio.gather(
            *(unpaid.admit("", "address:10.0.0.9") for _ in range(20)), return_exceptions=True
        )
        admitted = [result for result in results if isinstance(result, str)]
        assert len(admitted) == 5, results
        assert all(isinstance(result, UnpaidLimitError) for result in results if result not in admitted)
        # Another caller has room of its own; a reservation counts until `note` moves it to its task.
        await unpaid.admit("", "address:10.0.0.10")
        assert await unpaid.refusal("", "address:10.0.0.9") is not None
        # An unused reservation holds its place a minute at most.
        later = datetime.now(UTC) + timedelta(seconds=61)
        assert await unpaid.refusal("", "address:10.0.0.9", now=later) is None


async def test_a_caller_starting_too_many_priced_tasks_a_minute_is_refused(
    start_merchant: MerchantStarter, database_url: str
) -> None:
    merchant = start_merchant(database_url, max_unpaid_tasks=100, max_unpaid_per_minute=3)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        for _ in range(3):
            await wire.send(rejection_message((await offer(wire))["id"]))  # none awaits payment
        failure = await refused(wire, user_message())
        assert "3 priced tasks unpaid within a minute" in failure.message
    assert await counts(database_url) == (3, 3, 3)


async def test_a_tenant_s_own_limit_applies_to_it_alone(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\n\n'
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\nmax_unpaid_tasks = 1\n'
    )
    merchant = start_merchant(sqlite_url, tenants_file=tenants, max_unpaid_tasks=3)
    async with merchant.http() as http:
        acme, default = MerchantWire(http, "rest", "acme"), MerchantWire(http, "rest")
        await offer(acme)
        await refused(acme, user_message())
        for _ in range(3):
            await offer(default)
        await refused(default, user_message())
    assert await counts(sqlite_url) == (4, 4, 4)


def test_the_caller_is_the_principal_else_the_address() -> None:
    class Alice(User):
        @property
        def is_authenticated(self) -> bool:
            return True

        @property
        def user_name(self) -> str:
            return "alice"

    anonymous = ServerCallContext(user=UnauthenticatedUser(), state={CLIENT_ADDRESS_KEY: "10.0.0.7"})
    assert caller_of(anonymous) == "address:10.0.0.7"
    assert caller_of(ServerCallContext(user=Alice(), state={CLIENT_ADDRESS_KEY: "10.0.0.7"})) == "user:alice"
    assert caller_of(ServerCallContext(user=UnauthenticatedUser())) == "address:unknown"


def _anonymous_at(address: str) -> str:
    return caller_of(ServerCallContext(user=UnauthenticatedUser(), state={CLIENT_ADDRESS_KEY: address}))


def test_an_anonymous_ipv6_caller_is_its_64_and_an_ipv4_one_its_address() -> None:
    assert _anonymous_at("2001:db8:1:2::1") == "address:2001:db8:1:2::/64"
    assert _anonymous_at("2001:db8:1:2:ffff:ffff:ffff:ffff") == "address:2001:db8:1:2::/64"
    assert _anonymous_at("2001:db8:1:3::1") == "address:2001:db8:1:3::/64"
    assert _anonymous_at("::ffff:10.0.0.7") == "address:10.0.0.7"
    assert _anonymous_at("10.0.0.7") == "address:10.0.0.7"
    assert _anonymous_at("10.0.0.8") == "address:10.0.0.8"


async def test_every_address_of_an_ipv6_64_shares_one_limit(database_url: str) -> None:
    async with _unpaid(database_url) as unpaid:  # two tasks awaiting payment per caller
        for host in ("2001:db8:1:2::1", "2001:db8:1:2::2"):
            await unpaid.admit("", _anonymous_at(host))
        with pytest.raises(UnpaidLimitError):
            await unpaid.admit("", _anonymous_at("2001:db8:1:2:a:b:c:d"))  # a fresh address of the same /64
        await unpaid.admit("", _anonymous_at("2001:db8:1:3::1"))  # the next /64 is another caller
        for host in ("10.0.0.7", "10.0.0.7"):
            await unpaid.admit("", _anonymous_at(host))
        await unpaid.admit("", _anonymous_at("10.0.0.8"))  # IPv4: each address is a caller


@asynccontextmanager
async def _unpaid(
    database_url: str, rules: UnpaidRules = RULES, offer_timeout_s: float = 300
) -> AsyncIterator[UnpaidWork]:
    """An `UnpaidWork` of its own on the merchant's database, for the test to drive."""
    engine = create_engine(database_url)
    try:
        yield UnpaidWork(
            engine,
            tenants=TenantRegistry.default(pay_to=DEFAULT_PAY_TO, price=1000),
            defaults=rules,
            offer_timeout_s=offer_timeout_s,
        )
    finally:
        await engine.dispose()


async def test_expired_offers_no_longer_count(start_merchant: MerchantStarter, sqlite_url: str) -> None:
    merchant = start_merchant(sqlite_url, max_unpaid_tasks=2)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        await offer(wire)
        await offer(wire)
        await refused(wire, user_message())
    [caller] = {row[0] for row in await _callers(sqlite_url)}
    async with _unpaid(sqlite_url) as unpaid:
        assert await unpaid.refusal("", caller) is not None
        # Past the terms' maxTimeoutSeconds the offers can no longer be paid: they hold no place.
        assert await unpaid.refusal("", caller, now=datetime.now(UTC) + timedelta(seconds=301)) is None


async def _callers(database_url: str) -> list[tuple[str, str]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                sa.select(offer_callers_table.c.caller, offer_callers_table.c.task_id)
            )
            return [(row.caller, row.task_id) for row in rows]
    finally:
        await engine.dispose()


async def _offered_tasks(database_url: str) -> set[str]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                sa.text("SELECT o.task_id FROM payment_offers o JOIN tasks t ON t.id = o.task_id")
            )
            return {row.task_id for row in rows}
    finally:
        await engine.dispose()


async def _set_state(database_url: str, task_id: str, state: OfferState) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                sa.text("UPDATE payment_offers SET state = :state WHERE task_id = :task_id"),
                {"state": state.value, "task_id": task_id},
            )
    finally:
        await engine.dispose()


async def test_the_purge_removes_unpaid_tasks_past_retention_and_nothing_being_paid(
    start_merchant: MerchantStarter, database_url: str
) -> None:
    merchant = start_merchant(database_url, max_unpaid_tasks=100)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        tasks = [await offer(wire) for _ in range(6)]
        await wire.send(rejection_message(tasks[1]["id"]))
    taken = {OfferState.WORKING: tasks[2], OfferState.SETTLING: tasks[3], OfferState.PAID: tasks[4]}
    for state, task in taken.items():
        await _set_state(database_url, task["id"], state)
    later = datetime.now(UTC) + timedelta(seconds=3601)
    async with _unpaid(database_url) as unpaid:
        # Within the retention nothing goes.
        assert (await unpaid.purge()).offers == 0
        assert await counts(database_url) == (6, 6, 6)
        report = await unpaid.purge(now=later)
        assert (report.tasks, report.offers) == (3, 3)  # two offered, one rejected
        # Who asked is forgotten past the retention, whatever became of the offer.
        assert await counts(database_url) == (3, 3, 0)
        assert await _offered_tasks(database_url) == {task["id"] for task in taken.values()}
        # Nothing left to purge: a second pass removes nothing.
        assert (await unpaid.purge(now=later)).offers == 0


async def test_a_tenant_sees_its_bounds_in_its_billing_api(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\n\n'
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\napi_token = "{ACME_TOKEN}"\n'
        "max_unpaid_tasks = 7\nunpaid_retention_s = 900\n"
    )
    merchant = start_merchant(sqlite_url, tenants_file=tenants, max_unpaid_per_minute=11)
    async with merchant.http() as http:
        response = await http.get("/tenants/acme/limits", headers={"authorization": f"Bearer {ACME_TOKEN}"})
        assert (await http.get("/tenants/acme/limits")).status_code == 401
    ceiling = {"maxAwaitingPerCaller": 7, "maxUnpaidPerMinutePerCaller": 11, "retentionSeconds": 900}
    assert response.json() == {
        "tenant": "acme",
        "unpaid": {**ceiling, "offerTimeoutSeconds": 300},
        "unpaidCeiling": ceiling,
        "unpaidOwn": dict.fromkeys(ceiling),
    }


async def test_the_purge_runs_in_the_background_counted_and_logged(
    start_merchant: MerchantStarter, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    merchant = start_merchant(sqlite_url)
    async with merchant.http() as http:
        await offer(MerchantWire(http, "jsonrpc"))
        scraped = (await http.get("/metrics")).text
    assert 'x402_merchant_unpaid_purged_total{what="tasks"} 0.0' in scraped
    # A retention of nothing, so the pass has something to purge without waiting for the clock.
    reports: list[PurgeReport] = []
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="a2a_x402.merchant.payments._unpaid")
    async with _unpaid(sqlite_url, UnpaidRules(retention_s=0), offer_timeout_s=0) as unpaid:
        running = asyncio.create_task(unpaid.run(stop, interval_s=0.01, on_purge=reports.append))
        await wait_until(lambda: len(reports) >= 2, what="two purge passes")
        stop.set()
        await running
    assert reports[0] == PurgeReport(tasks=1, offers=1)
    assert reports[1] == PurgeReport()
    assert "purged 1 unpaid tasks and 1 offers past their retention" in caplog.text
    assert await counts(sqlite_url) == (0, 0, 0)


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
async def test_a_priced_request_refused_after_its_admission_leaves_no_place_taken(
    start_merchant: MerchantStarter, sqlite_url: str, binding: str
) -> None:
    # Admitted (a place taken for its task), then refused by the SDK for a part it cannot take: a refused
    # request changes nothing, its place included.
    merchant = start_merchant(sqlite_url, max_unpaid_tasks=2, max_unpaid_per_minute=100)
    message = user_message()
    message["parts"] = [{"raw": "uOs=", "mediaType": "application/x-unheard-of"}]
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        with pytest.raises(A2ACallError):
            await wire.send(message)
        assert await counts(sqlite_url) == (0, 0, 0)
        await offer(wire)
        await offer(wire)  # both places are still free
        assert await counts(sqlite_url) == (2, 2, 2)
