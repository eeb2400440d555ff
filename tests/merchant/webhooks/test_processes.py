"""Delivery by real operating-system processes on one PostgreSQL database, to a real receiver on loopback.

`x402-merchant serve` SIGKILLed between booking a payment and delivering its event, then restarted: the
event arrives, by its id, signed. Two `x402-merchant webhooks worker` processes draining one outbox: every
event is delivered, and never sent by both at once.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import sqlalchemy as sa

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import (
    EndpointConfig,
    Outbox,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoints,
)
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.faults.clients import open_task, pay
from tests.faults.processes import MerchantProcesses, merchant_processes
from tests.fixtures.deadlines import wait_until
from tests.fixtures.error_logs import watch_log
from tests.fixtures.merchant import DEFAULT_PAY_TO, DEFAULT_PRICE, MerchantWire
from tests.fixtures.servers import base_url_of, bind_loopback, serve_asgi
from tests.merchant.ledger.bookings import booking

from .conftest import SECRET
from .receiver import HOOK_PATH, Receiver, Reply

StartServer = Callable[..., str]

# A clean stop on SIGTERM is asserted: only a worker that hangs takes this long.
_WORKER_STOP_TIMEOUT_S = 60.0


@pytest.fixture
def merchants(chain: DevChain, postgres_url: str, tmp_path: Path) -> Iterator[MerchantProcesses]:
    """`x402-merchant serve` processes on the test chain and a fresh PostgreSQL database."""
    with merchant_processes(chain, postgres_url, tmp_path) as processes:
        yield processes


def _tenants_file(path: Path, webhook_url: str) -> Path:
    path.write_text(
        "[default]\n"
        f'pay_to = "{DEFAULT_PAY_TO}"\n'
        f"price = {DEFAULT_PRICE}\n"
        f'webhook_url = "{webhook_url}"\n'
        f'webhook_secret = "{SECRET}"\n'
    )
    return path


async def test_a_merchant_killed_before_delivery_delivers_the_event_after_a_restart(
    merchants: MerchantProcesses,
    new_payer: Callable[..., str],
    postgres_url: str,
    tmp_path: Path,
) -> None:
    receiver = Receiver([SECRET])
    sock = bind_loopback()  # bound, not listening: the receiver is down, its port kept
    tenants = _tenants_file(tmp_path / "tenants.toml", base_url_of(sock) + HOOK_PATH)
    merchant = await merchants.start(tenants_file=tenants, webhooks_allow_private="true")
    engine = create_engine(postgres_url)
    outbox = Outbox(engine)
    try:
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task_id, terms = await open_task(wire)
            paid = await pay(wire, task_id, sign_payment(new_payer(), terms))
        assert paid["status"]["state"] == "TASK_STATE_COMPLETED", paid["status"]

        async def refused() -> bool:  # booked and committed, and its first delivery attempt failed
            return any(entry.outcome == "retry" for entry in await outbox.delivery_log(""))

        await wait_until(refused, what="the first delivery attempt to fail")
        merchant.kill()
        [event] = await outbox.events_since("")
        [pending] = await outbox.deliveries("")
        assert (event.type, pending.status, pending.delivered_at) == ("settlement.completed", "pending", None)

        with ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, serve_asgi(receiver.app, sock=sock))  # back up
            restarted = await merchants.restart(merchant)
            await wait_until(lambda: event.id in receiver.ids(), what="the event to arrive")
            restarted.stop()
        [delivered] = [state for state in await outbox.deliveries("") if state.event_id == event.id]
    finally:
        await engine.dispose()

    # Later events (settlement.finalized once the restarted merchant sees the confirmations) may follow.
    [request] = [request for request in receiver.received if request.webhook_id == event.id]
    assert request.webhook_id == event.id and request.body == event.payload
    assert request.verified_with == (True,)  # verified by standardwebhooks with the tenant's secret
    assert (delivered.status, delivered.attempts) == ("delivered", 2)


async def _start_worker(database_url: str, log: Path) -> asyncio.subprocess.Process:
    env = {key: value for key, value in os.environ.items() if not key.startswith("X402_")}
    env.update({"X402_DATABASE_URL": database_url, "X402_WEBHOOKS_ALLOW_PRIVATE": "true"})
    watch_log(log)
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("x402-merchant")),
        *("webhooks", "worker", "--batch-size", "4", "--poll-interval", "0.05"),
        # An attempt's deadline and its claim's lease that only a hung receiver or worker reaches: a lease
        # run out under a starved worker would let the other worker send the same event at once.
        *("--lease", "40", "--timeout", "30"),
        env=env,
        cwd=log.parent,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=log.open("wb"),
    )


async def _stop(process: asyncio.subprocess.Process) -> int:
    if process.returncode is None:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), _WORKER_STOP_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode


async def test_two_worker_processes_on_one_postgres_never_send_an_event_twice_at_once(
    postgres_url: str, asgi_server: StartServer, tmp_path: Path
) -> None:
    events_count, failures = 60, 12
    receiver = Receiver([SECRET], plan=[Reply(500, delay_s=0.02)] * failures, delay_s=0.02)
    engine = create_engine(postgres_url)
    url = asgi_server(receiver.app) + HOOK_PATH
    await WebhookEndpoints(engine).sync([EndpointConfig("acme", url, SECRET)])
    ledger = Ledger(engine, Outbox(engine))
    for _ in range(events_count):
        await ledger.book_settlement(booking())
    logs = [tmp_path / f"worker-{index}.log" for index in range(2)]
    workers = [await _start_worker(postgres_url, log) for log in logs]

    async def all_delivered() -> bool:
        async with engine.connect() as connection:
            statuses = (await connection.execute(sa.select(WebhookDelivery.status))).scalars().all()
        return len(statuses) == events_count and set(statuses) == {"delivered"}

    try:
        await wait_until(all_delivered, what="every event to be delivered")
    except AssertionError as exc:
        raise AssertionError("\n".join(log.read_text(errors="replace")[-3000:] for log in logs)) from exc
    finally:
        returncodes = [await _stop(worker) for worker in workers]
    async with engine.connect() as connection:
        attempts = (await connection.execute(sa.select(WebhookAttempt.__table__))).all()
    await engine.dispose()

    assert returncodes == [0, 0]  # both shut down cleanly on SIGTERM
    for log in logs:  # each said so in its last line
        assert log.read_text().splitlines()[-1].endswith(" stopped by SIGTERM"), log.read_text()[-2000:]
    assert receiver.overlaps == []  # never two requests for one webhook-id in flight at once
    accepted = Counter(request.webhook_id for request in receiver.received if request.answered == 200)
    assert len(accepted) == events_count and set(accepted.values()) == {1}  # each event delivered, once
    assert all(request.verified for request in receiver.received)
    assert len(attempts) == len(receiver.received) == events_count + failures  # one request per attempt
    assert set(Counter((attempt.delivery_id, attempt.attempt) for attempt in attempts).values()) == {1}
    assert len({attempt.worker for attempt in attempts}) == 2  # both processes delivered
