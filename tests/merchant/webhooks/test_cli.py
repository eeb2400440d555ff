"""`webhooks list|redeliver|rotate-secret|test|enable|worker` with a tenants file and a real receiver."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from standardwebhooks import Webhook

from merchant.ledger import Ledger
from merchant.webhooks import DeliveryWorker, Outbox, WebhookEndpoints, generate_secret, webhooks_cli
from storage import create_engine
from tests.merchant.ledger.bookings import PAY_TO, booking

from .conftest import FAST_RETRY, SECRET, drain
from .receiver import HOOK_PATH, Receiver, Reply


class Cli:
    """Runs `webhooks` commands against one database and tenants file, off the test's event loop."""

    def __init__(self, database_url: str, tenants_file: Path) -> None:
        self.env = {
            "X402_DATABASE_URL": database_url,
            "X402_TENANTS_FILE": str(tenants_file),
            "X402_WEBHOOKS_ALLOW_PRIVATE": "true",
        }

    async def __call__(self, *args: str) -> Result:
        return await asyncio.to_thread(CliRunner().invoke, webhooks_cli, list(args), env=self.env)


@pytest.fixture
def receiver() -> Receiver:
    """A receiver holding the configured secret."""
    return Receiver([SECRET])


@pytest.fixture
async def cli(sqlite_url: str, tmp_path: Path, receiver: Receiver, asgi_server: Callable[..., str]) -> Cli:
    """The CLI with a tenants file whose tenant `acme` sends its webhooks to `receiver`."""
    url = asgi_server(receiver.app) + HOOK_PATH
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f'[tenants.acme]\npay_to = "{PAY_TO}"\nprice = 1000\nwebhook_url = "{url}"\n'
        f'webhook_secret = "{SECRET}"\napi_token = "acme-token-0123456789"\n'
        f'[tenants.globex]\npay_to = "{PAY_TO}"\nprice = 1000\n'
    )
    return Cli(sqlite_url, tenants)


@pytest.fixture
async def ledger(sqlite_url: str) -> AsyncIterator[Ledger]:
    """A ledger on the CLI's database."""
    engine = create_engine(sqlite_url)
    yield Ledger(engine, Outbox(engine))
    await engine.dispose()


async def test_test_sends_a_signed_test_event(cli: Cli, receiver: Receiver) -> None:
    result = await cli("test", "--tenant", "acme")

    assert result.exit_code == 0, result.output
    [request] = receiver.received
    assert request.verified and b'"type":"webhook.test"' in request.body
    assert "status=200" in result.output and HOOK_PATH in result.output


async def test_test_fails_when_the_receiver_refuses(cli: Cli, receiver: Receiver) -> None:
    receiver.plan.append(Reply(503))

    result = await cli("test", "--tenant", "acme")

    assert result.exit_code == 1
    assert "status=503" in result.output and "not every endpoint accepted" in result.output


async def test_list_shows_endpoints_and_the_delivery_log(
    cli: Cli, ledger: Ledger, sqlite_url: str, receiver: Receiver
) -> None:
    assert (await cli("list", "--tenant", "acme")).exit_code == 0  # syncs the endpoint from the file
    await ledger.book_settlement(booking())
    engine = create_engine(sqlite_url)
    [event] = await Outbox(engine).events_since("acme")
    async with httpx.AsyncClient() as client:
        worker = DeliveryWorker(engine, client, retry=FAST_RETRY, allow_private_targets=True)
        await drain(worker, lambda: _received(receiver))
    await engine.dispose()

    result = await cli("list", "--tenant", "acme")

    assert result.exit_code == 0, result.output
    endpoint_line, log_line = result.output.splitlines()
    assert (
        endpoint_line.startswith("endpoint we_")
        and endpoint_line.endswith(HOOK_PATH)
        and " active " in endpoint_line
    )
    assert event.id in log_line and "settlement.completed" in log_line and "delivered status=200" in log_line


async def _received(receiver: Receiver) -> bool:
    return bool(receiver.received)


async def test_rotate_secret_then_both_secrets_sign(cli: Cli, receiver: Receiver) -> None:
    new = generate_secret()

    rotated = await cli("rotate-secret", "--tenant", "acme", "--secret", new)
    tested = await cli("test", "--tenant", "acme")

    assert rotated.exit_code == 0, rotated.output
    assert rotated.output == f"{new}\n"
    assert tested.exit_code == 0, tested.output
    [request] = receiver.received
    headers = {"webhook-id": request.webhook_id, "webhook-timestamp": request.timestamp}
    Webhook(new).verify(request.body, {**headers, "webhook-signature": request.signature})
    Webhook(SECRET).verify(request.body, {**headers, "webhook-signature": request.signature})
    unknown = await cli("rotate-secret", "--tenant", "globex")
    assert unknown.exit_code == 1 and "endpoint_not_found" in unknown.output


async def test_redeliver_and_enable(cli: Cli, ledger: Ledger, sqlite_url: str) -> None:
    assert (await cli("list", "--tenant", "acme")).exit_code == 0
    await ledger.book_settlement(booking())
    engine = create_engine(sqlite_url)
    [event] = await Outbox(engine).events_since("acme")

    queued = await cli("redeliver", event.id, "--tenant", "acme")
    missing = await cli("redeliver", event.id, "--tenant", "globex")
    enabled = await cli("enable", "--tenant", "acme")
    [endpoint] = await WebhookEndpoints(engine).list("acme")
    await engine.dispose()

    assert queued.exit_code == 0 and queued.output == f"{event.id} queued for 1 endpoint(s)\n"
    assert missing.exit_code == 1 and "event_not_found" in missing.output
    assert enabled.output == f"endpoint {endpoint.id} active\n" and endpoint.active


async def test_worker_refuses_a_lease_shorter_than_the_timeout(cli: Cli) -> None:
    result = await cli("worker", "--lease", "5", "--timeout", "10")

    assert result.exit_code == 2 and "--lease" in result.output
