"""Delivery against a real receiver on 127.0.0.1: signatures, retries, outages, rotation, 410, Retry-After."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import Ledger, check_invariants
from a2a_x402.merchant.webhooks import (
    DeliveryWorker,
    EndpointConfig,
    Outbox,
    RetryPolicy,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEndpoints,
    generate_secret,
)
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S, wait_until, within_deadline
from tests.fixtures.servers import base_url_of, bind_loopback, serve_asgi
from tests.merchant.ledger.bookings import booking

from .conftest import FAST_RETRY, SECRET, SQLITE_ONLY, WorkerFactory, drain
from .receiver import HOOK_PATH, Receiver, Reply, trickling_receiver

StartServer = Callable[..., str]
REPOSITORY = Path(__file__).resolve().parents[3]


async def _deliveries(engine: AsyncEngine) -> list[sa.Row[tuple[object, ...]]]:
    async with engine.connect() as connection:
        return list((await connection.execute(sa.select(WebhookDelivery.__table__))).all())


async def _attempts(engine: AsyncEngine) -> list[sa.Row[tuple[object, ...]]]:
    table = WebhookAttempt.__table__
    async with engine.connect() as connection:
        return list((await connection.execute(sa.select(table).order_by(table.c.started_at))).all())


async def _all_delivered(engine: AsyncEngine) -> bool:
    return all(row.status == "delivered" for row in await _deliveries(engine))


async def _connection_refused(engine: AsyncEngine) -> bool:
    """Whether an attempt has failed to connect."""
    return any((attempt.error or "").startswith("no answer: ") for attempt in await _attempts(engine))


# Retries for more than the outage test's waits, however long a busy machine takes to restart a server.
_OUTLASTS_ANY_OUTAGE = RetryPolicy(delays_s=(0.05, 0.1, 0.2) + (0.3,) * 100)


async def test_an_event_arrives_signed_byte_for_byte(
    ledger: Ledger,
    outbox: Outbox,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    receiver = Receiver([SECRET])
    url = asgi_server(receiver.app) + HOOK_PATH
    await endpoints.sync([EndpointConfig("acme", url, SECRET)])
    entry = await ledger.book_settlement(booking())
    [event] = await outbox.events_since("acme")

    await drain(make_worker(), lambda: _all_delivered(engine))

    [received] = receiver.received
    assert received.body == event.payload
    assert received.webhook_id == event.id and received.verified_with == (True,)
    assert received.signature.startswith("v1,") and " " not in received.signature
    [attempt] = await _attempts(engine)
    assert (attempt.outcome, attempt.status_code, attempt.error, attempt.attempt) == (
        "delivered",
        200,
        None,
        1,
    )
    assert attempt.latency_ms >= 0
    [delivery] = await _deliveries(engine)
    assert delivery.lease_token is None and delivery.delivered_at is not None
    assert entry.id in event.payload.decode()


async def test_a_flaky_receiver_that_goes_down_and_comes_back_loses_nothing(
    ledger: Ledger,
    outbox: Outbox,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
) -> None:
    receiver = Receiver([SECRET], plan=[Reply(500), Reply(502), Reply(500), Reply(429), Reply(500)])
    sock = bind_loopback()
    port = sock.getsockname()[1]
    url = base_url_of(sock) + HOOK_PATH
    await endpoints.sync([EndpointConfig("acme", url, SECRET)])
    stop = asyncio.Event()
    worker = make_worker(timeout_s=1.0, retry=_OUTLASTS_ANY_OUTAGE)
    running = asyncio.create_task(worker.run(stop, poll_interval_s=0.02))
    with ExitStack() as stack:
        await asyncio.to_thread(stack.enter_context, serve_asgi(receiver.app, sock=sock))
        for _ in range(10):
            await ledger.book_settlement(booking())
        await wait_until(lambda: bool(receiver.received), what="a first request")
        await asyncio.to_thread(stack.close)  # the receiver goes down...
        for _ in range(10):
            await ledger.book_settlement(booking())
        await wait_until(lambda: _connection_refused(engine), what="an attempt to meet the outage")
        # ...and comes back on the same port.
        await asyncio.to_thread(stack.enter_context, serve_asgi(receiver.app, sock=bind_loopback(port)))
        events = await outbox.events_since("acme")

        async def all_arrived() -> bool:
            return receiver.ids() == {event.id for event in events} and await _all_delivered(engine)

        await wait_until(all_arrived, what="every event to arrive")
        stop.set()
        await running

    assert len(events) == 20
    assert all(request.verified for request in receiver.received)
    payloads = {event.id: event.payload for event in events}
    assert all(
        request.body == payloads[request.webhook_id] for request in receiver.received
    )  # duplicates: same id, same bytes
    attempts = await _attempts(engine)
    errors = [attempt.error for attempt in attempts if attempt.error]
    assert [attempt.status_code for attempt in attempts if attempt.status_code in (500, 502, 429)]
    assert any(error.startswith("no answer: ") for error in errors), errors  # the outage was seen as such
    assert {attempt.outcome for attempt in attempts} == {"retry", "delivered"}


@SQLITE_ONLY
async def test_exhausting_the_schedule_fails_the_delivery(
    ledger: Ledger,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    receiver = Receiver(
        [SECRET], plan=[Reply(500), Reply(302, {"location": "http://127.0.0.1:1/"}), Reply(404)]
    )
    await endpoints.sync([EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)])
    await ledger.book_settlement(booking())
    worker = make_worker(retry=RetryPolicy(delays_s=(0.01, 0.01), jitter_ratio=0))

    async def failed() -> bool:
        return [row.status for row in await _deliveries(engine)] == ["failed"]

    await drain(worker, failed)

    attempts = await _attempts(engine)
    assert [(a.attempt, a.status_code, a.outcome) for a in attempts] == [
        (1, 500, "retry"),
        (2, 302, "retry"),  # a redirect is not followed: it is a failure
        (3, 404, "failed"),
    ]
    assert attempts[-1].next_attempt_at is None
    assert len({request.webhook_id for request in receiver.received}) == 1  # the same webhook-id every time


@SQLITE_ONLY
async def test_a_timeout_is_a_failed_attempt(
    ledger: Ledger,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    receiver = Receiver([SECRET], plan=[Reply(delay_s=0.5)])
    await endpoints.sync([EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)])
    await ledger.book_settlement(booking())

    await drain(make_worker(timeout_s=0.2, lease_s=1.0), lambda: _all_delivered(engine))

    first, second = await _attempts(engine)
    assert (first.outcome, first.status_code, first.error) == ("retry", None, "timeout after 0.2 s")
    assert second.outcome == "delivered"


@SQLITE_ONLY
async def test_a_receiver_trickling_its_headers_is_cut_off_at_the_deadline(
    ledger: Ledger, endpoints: WebhookEndpoints, engine: AsyncEngine, make_worker: WorkerFactory
) -> None:
    # The lease outlasts the whole trickle many times over: the attempt must end by its deadline, not by
    # the lease running out. What shows it ended by the deadline is counted, not timed: the receiver was
    # still trickling when the worker returned (a loaded machine only makes the count smaller).
    deadline_s, lease_s = 0.5, 60.0
    with trickling_receiver() as trickle:  # every byte within httpx's per-read timeout, ~12 s in all
        await endpoints.sync([EndpointConfig("acme", trickle.base_url + HOOK_PATH, SECRET)])
        await ledger.book_settlement(booking())

        assert await make_worker(timeout_s=deadline_s, lease_s=lease_s).run_once() == 1

        assert not trickle.finished, "the worker waited for the whole answer instead of its deadline"
    [attempt] = await _attempts(engine)
    [delivery] = await _deliveries(engine)
    assert (attempt.outcome, attempt.status_code, attempt.error) == ("retry", None, "timeout after 0.5 s")
    assert attempt.latency_ms >= deadline_s * 900
    assert (delivery.status, delivery.lease_token, delivery.last_error) == (
        "pending",
        None,
        "timeout after 0.5 s",
    )


@SQLITE_ONLY
@pytest.mark.parametrize("backlog", [5, 20], ids=["backlog", "backlog-beyond-the-claim-candidates"])
async def test_a_slow_endpoint_does_not_delay_another_tenants_event(
    ledger: Ledger,
    outbox: Outbox,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
    backlog: int,
) -> None:
    slow, fast = Receiver([SECRET]), Receiver([SECRET])
    slow.holding = True  # answers only when released, after the worker's deadline
    await endpoints.sync(
        [
            EndpointConfig("slow", asgi_server(slow.app) + HOOK_PATH, SECRET),
            EndpointConfig("acme", asgi_server(fast.app) + HOOK_PATH, SECRET),
        ]
    )
    # An attempt deadline that only a worker holding the other event behind the slow sends reaches.
    deadline_s = 120.0
    worker = make_worker(timeout_s=deadline_s, lease_s=2 * deadline_s, batch_size=4, endpoint_concurrency=2)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop, poll_interval_s=0.02))
    try:
        await ledger.book_settlement(booking(tenant="slow"))
        assert await asyncio.to_thread(slow.arrived.wait, HANG_S)  # one slow send is in flight
        # Then a backlog that would fill every slot of the worker; 20 is more than a claim ranks (4 x 4).
        for _ in range(backlog):
            await ledger.book_settlement(booking(tenant="slow"))
        await asyncio.sleep(0.3)  # many claim passes
        await ledger.book_settlement(booking())
        [event] = await outbox.events_since("acme")
        # Not held until the slow endpoint's deadline: it arrives in half of it or the wait fails.
        await wait_until(lambda: event.id in fast.ids(), what="the other event", timeout_s=deadline_s / 2)
        answered_slow, slow_peak = slow.ids(), slow.peak
    finally:
        slow.released.set()
        stop.set()
        await running

    assert answered_slow == set()  # the slow attempts were still open when the other event went out
    assert slow_peak == 2  # no more than endpoint_concurrency at once


async def test_one_pass_reaches_an_endpoint_behind_another_ones_backlog(
    ledger: Ledger,
    outbox: Outbox,
    endpoints: WebhookEndpoints,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    busy, other = Receiver([SECRET]), Receiver([SECRET])
    await endpoints.sync(
        [
            EndpointConfig("busy", asgi_server(busy.app) + HOOK_PATH, SECRET),
            EndpointConfig("acme", asgi_server(other.app) + HOOK_PATH, SECRET),
        ]
    )
    for _ in range(12):  # due before acme's event, and more than a claim ranks (4 x batch_size)
        await ledger.book_settlement(booking(tenant="busy"))
    await ledger.book_settlement(booking())
    [first_busy, *_] = await outbox.events_since("busy")
    [acme_event] = await outbox.events_since("acme")

    claimed = await make_worker(batch_size=2, endpoint_concurrency=1).run_once()

    assert claimed == 2
    assert busy.ids() == {first_busy.id}  # the earliest due, and no more than endpoint_concurrency
    assert other.ids() == {acme_event.id}


@SQLITE_ONLY
async def test_retry_after_on_429_and_503_is_honoured(
    ledger: Ledger,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    receiver = Receiver([SECRET], plan=[Reply(429, {"retry-after": "1"}), Reply(503, {"retry-after": "1"})])
    await endpoints.sync([EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)])
    await ledger.book_settlement(booking())

    await drain(
        make_worker(retry=RetryPolicy(delays_s=(0.01, 0.01, 5.0), jitter_ratio=0)),
        lambda: _all_delivered(engine),
    )

    first, second, third = receiver.received
    assert (first.answered, second.answered, third.answered) == (429, 503, 200)
    assert second.at - first.at >= 0.95 and third.at - second.at >= 0.95  # not the scheduled 0.01 s
    waits = [attempt.next_attempt_at - attempt.started_at for attempt in (await _attempts(engine))[:2]]
    assert all(wait >= timedelta(seconds=1) for wait in waits)


@SQLITE_ONLY
async def test_secret_rotation_signs_with_both_secrets_during_the_overlap(
    ledger: Ledger,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    old, new = SECRET, generate_secret()
    receiver = Receiver([old, new])
    url = asgi_server(receiver.app) + HOOK_PATH
    [endpoint] = await endpoints.sync([EndpointConfig("acme", url, old)])
    worker = make_worker()

    await ledger.book_settlement(booking())
    await drain(worker, lambda: _all_delivered(engine))
    rotated = await endpoints.rotate_secret(endpoint.id, new_secret=new, overlap=timedelta(hours=1))
    await ledger.book_settlement(booking())
    await drain(worker, lambda: _all_delivered(engine))
    async with engine.begin() as connection:  # an hour later: the overlap is over
        expired = datetime.now(UTC) - timedelta(seconds=1)
        await connection.execute(sa.update(WebhookEndpoint).values(previous_secret_expires_at=expired))
    await ledger.book_settlement(booking())
    await drain(worker, lambda: _all_delivered(engine))

    before, during, after = receiver.received
    assert rotated.secret == new and rotated.previous_secret == old
    assert before.verified_with == (True, False)
    assert during.verified_with == (True, True)  # a receiver holding either secret accepts it
    assert len(during.signature.split(" ")) == 2 and all(
        part.startswith("v1,") for part in during.signature.split()
    )
    assert after.verified_with == (False, True) and " " not in after.signature  # only the new secret signs


async def test_410_disables_the_endpoint_until_it_is_enabled(
    ledger: Ledger,
    outbox: Outbox,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    receiver = Receiver([SECRET], plan=[Reply(410)])
    [endpoint] = await endpoints.sync([EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)])
    worker = make_worker()
    await ledger.book_settlement(booking())

    async def gone() -> bool:
        return [row.status for row in await _deliveries(engine)] == ["failed"]

    await drain(worker, gone)
    await ledger.book_settlement(booking())
    claimed = await worker.run_once()

    [disabled] = await endpoints.list("acme")
    assert (disabled.status, disabled.disabled_reason) == ("disabled", "gone: the receiver answered 410")
    assert claimed == 0 and len(receiver.received) == 1  # nothing more is sent to a gone endpoint
    assert len(await _deliveries(engine)) == 1  # the event booked meanwhile was not queued for it
    assert [attempt.outcome for attempt in await _attempts(engine)] == ["disabled"]

    await endpoints.enable(endpoint.id)
    await ledger.book_settlement(booking())
    _first, while_gone, _third = await outbox.events_since("acme")
    assert await outbox.redeliver("acme", while_gone.id) == 1  # what it missed is sent on request

    async def resumed() -> bool:
        return sorted(row.status for row in await _deliveries(engine)) == ["delivered", "delivered", "failed"]

    await drain(worker, resumed)
    assert sorted(request.answered for request in receiver.received) == [200, 200, 410]


@SQLITE_ONLY
async def test_private_targets_are_refused_unless_allowed(
    ledger: Ledger,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    receiver = Receiver([SECRET])
    await endpoints.sync([EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)])
    await ledger.book_settlement(booking())
    worker = make_worker(allow_private_targets=False, retry=RetryPolicy(delays_s=(), jitter_ratio=0))

    assert await worker.run_once() == 1

    [attempt] = await _attempts(engine)
    assert attempt.outcome == "failed" and attempt.status_code is None
    assert attempt.error.startswith("unsafe_webhook_target: 127.0.0.1 resolves to non-public address")
    assert receiver.received == []


async def test_two_workers_on_one_postgres_never_send_an_event_twice_at_once(
    postgres_url: str, client: httpx.AsyncClient, asgi_server: StartServer
) -> None:
    engines = [create_engine(postgres_url), create_engine(postgres_url)]  # as two replicas would
    receiver = Receiver([SECRET], plan=[Reply(500, delay_s=0.02)] * 20, delay_s=0.02)
    await WebhookEndpoints(engines[0]).sync(
        [EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)]
    )
    ledger = Ledger(engines[0], Outbox(engines[0]))
    for _ in range(40):
        await ledger.book_settlement(booking())
    # A deadline no busy machine reaches: an attempt cut short after its 200 is sent again, by design.
    workers = [
        DeliveryWorker(
            engine,
            client,
            retry=FAST_RETRY,
            allow_private_targets=True,
            batch_size=4,
            timeout_s=15,
        )
        for engine in engines
    ]
    stop = asyncio.Event()
    running = [asyncio.create_task(worker.run(stop, poll_interval_s=0.01)) for worker in workers]
    try:
        await wait_until(lambda: _all_delivered(engines[1]), what="every event to be delivered")
    finally:
        stop.set()
        await asyncio.gather(*running)
    attempts = await _attempts(engines[1])
    await check_invariants(engines[0])
    for engine in engines:
        await engine.dispose()

    assert receiver.overlaps == []  # never two requests for one event in flight at once
    accepted = Counter(request.webhook_id for request in receiver.received if request.answered == 200)
    assert len(accepted) == 40 and set(accepted.values()) == {1}  # every event delivered, once
    assert sum(request.answered == 500 for request in receiver.received) == 20
    assert len(attempts) == len(receiver.received) == 60  # one request per attempt
    per_delivery = Counter((attempt.delivery_id, attempt.attempt) for attempt in attempts)
    assert set(per_delivery.values()) == {1}  # each attempt recorded once, by one worker
    assert {attempt.worker for attempt in attempts} == {worker.worker_id for worker in workers}  # both worked


async def test_a_worker_killed_mid_delivery_loses_nothing(
    postgres_url: str, client: httpx.AsyncClient, asgi_server: StartServer
) -> None:
    engine = create_engine(postgres_url)
    receiver = Receiver([SECRET])
    receiver.holding = True
    await WebhookEndpoints(engine).sync(
        [EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)]
    )
    await Ledger(engine, Outbox(engine)).book_settlement(booking())
    [event] = await Outbox(engine).events_since("acme")
    environment = {
        **os.environ,
        "X402_DATABASE_URL": postgres_url,
        "X402_WEBHOOKS_ALLOW_PRIVATE": "true",
    }
    environment.pop("X402_TENANTS_FILE", None)
    worker_process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from a2a_x402.merchant.webhooks import webhooks_cli; webhooks_cli()",
        *("worker", "--lease", "2", "--timeout", "1", "--poll-interval", "0.05"),
        env=environment,
        cwd=REPOSITORY,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert await asyncio.to_thread(receiver.arrived.wait, 30)  # the worker claimed it and is sending it
        worker_process.send_signal(signal.SIGKILL)
        assert await worker_process.wait() == -signal.SIGKILL
    finally:
        if worker_process.returncode is None:
            worker_process.kill()
            await worker_process.wait()
        receiver.holding = False
        receiver.released.set()
    [leased] = await _deliveries(engine)
    assert (leased.status, leased.attempts, await _attempts(engine)) == ("pending", 1, [])

    restarted = DeliveryWorker(
        engine, client, retry=FAST_RETRY, allow_private_targets=True, lease_s=5, timeout_s=1
    )
    await drain(restarted, lambda: _all_delivered(engine))
    [attempt] = await _attempts(engine)
    await engine.dispose()

    assert (attempt.attempt, attempt.outcome, attempt.worker) == (2, "delivered", restarted.worker_id)
    assert [request.webhook_id for request in receiver.received] == [event.id, event.id]
    assert all(request.verified and request.body == event.payload for request in receiver.received)


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease_s": 10.0, "timeout_s": 10.0}, "lease_s"),
        ({"lease_s": 10.2, "timeout_s": 10.0}, r"at least timeout_s \(10\) \+ 0.5"),
        ({"batch_size": 0}, "at least 1"),
        ({"endpoint_concurrency": 0}, "at least 1"),
    ],
)
def test_a_lease_must_outlast_the_deadline(
    make_worker: WorkerFactory, options: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make_worker(**options)


def test_retry_policy_schedule_jitter_and_retry_after() -> None:
    policy = RetryPolicy()

    delays = [policy.delay_after(failures) for failures in range(1, 11)]

    assert delays[-1] is None  # ten attempts in all, then the delivery fails
    assert sum(d for d in delays if d is not None) == pytest.approx(272_105, rel=0.1)  # ~75.6 h: about 3 days
    for scheduled, delay in zip(policy.delays_s, delays, strict=False):
        assert delay is not None and 0.9 * scheduled <= delay <= 1.1 * scheduled
    assert (
        RetryPolicy(delays_s=(5,), jitter_ratio=0).delay_after(1, retry_after_s=3600) == 5
    )  # capped at the schedule
    assert FAST_RETRY.delay_after(1, retry_after_s=0.25) == pytest.approx(0.25)


@SQLITE_ONLY
async def test_a_send_still_open_at_shutdown_is_stopped_after_the_drain_and_sent_again_later(
    ledger: Ledger,
    endpoints: WebhookEndpoints,
    engine: AsyncEngine,
    make_worker: WorkerFactory,
    asgi_server: StartServer,
) -> None:
    receiver = Receiver([SECRET])
    receiver.holding = True  # answers only when released
    await endpoints.sync([EndpointConfig("acme", asgi_server(receiver.app) + HOOK_PATH, SECRET)])
    deadline_s, drain_s = 60.0, 0.2
    worker = make_worker(timeout_s=deadline_s, lease_s=deadline_s + 1)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop, poll_interval_s=0.02, drain_s=drain_s))
    await ledger.book_settlement(booking())
    assert await asyncio.to_thread(receiver.arrived.wait, HANG_S)

    stop.set()
    # Shutdown waits the drain, not the attempt's 60 s deadline.
    await asyncio.wait_for(running, within_deadline(drain_s))

    [stopped] = await _deliveries(engine)
    assert stopped.status == "pending" and stopped.lease_until is not None  # nothing recorded as an outcome
    # Once its lease has expired (moved back here rather than waited for), another worker sends it again.
    async with engine.begin() as connection:
        await connection.execute(sa.update(WebhookDelivery).values(lease_until=datetime.now(UTC)))
    receiver.released.set()
    await drain(make_worker(), lambda: _all_delivered(engine))
    assert len(receiver.received) >= 1 and receiver.received[-1].answered == 200
