"""`webhooks list|redeliver|rotate-secret|test|enable|worker` with a tenants file and a real receiver."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from standardwebhooks import Webhook

from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.tenants import TenantConfigError, TenantRegistry
from a2a_x402.merchant.webhooks import (
    DeliveryWorker,
    EndpointConfig,
    InvalidEventError,
    Outbox,
    WebhookEndpoints,
    endpoint_configs,
    generate_secret,
    webhooks_cli,
)
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S
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


LOG_LINE = re.compile(
    r"^(?P<started>\S+) (?P<event>evt_\w+) settlement\.completed -> we_\w+ attempt (?P<attempt>\d+): "
    r"(?P<outcome>\w+) status=(?P<status>\d+) (?P<latency>\d+) ms error=- next=(?P<next>.+)$"
)


async def test_list_shows_endpoints_and_the_delivery_log(
    cli: Cli, ledger: Ledger, sqlite_url: str, receiver: Receiver
) -> None:
    receiver.plan.append(Reply(500, delay_s=0.05))
    assert (await cli("list", "--tenant", "acme")).exit_code == 0  # syncs the endpoint from the file
    await ledger.book_settlement(booking())
    engine = create_engine(sqlite_url)
    [event] = await Outbox(engine).events_since("acme")
    async with httpx.AsyncClient(timeout=HANG_S) as client:
        worker = DeliveryWorker(engine, client, retry=FAST_RETRY, allow_private_targets=True)
        await drain(worker, lambda: _answered(receiver, 200))
    await engine.dispose()

    result = await cli("list", "--tenant", "acme")

    assert result.exit_code == 0, result.output
    endpoint_line, *log_lines = result.output.splitlines()
    assert (
        endpoint_line.startswith("endpoint we_")
        and endpoint_line.endswith(HOOK_PATH)
        and " active " in endpoint_line
    )
    matches = [LOG_LINE.match(line) for line in log_lines]
    assert all(matches), log_lines
    delivered, retried = [match.groupdict() for match in matches if match is not None]  # newest first
    assert {delivered["event"], retried["event"]} == {event.id}
    assert (retried["attempt"], retried["outcome"], retried["status"]) == ("1", "retry", "500")
    assert (delivered["attempt"], delivered["outcome"], delivered["status"]) == ("2", "delivered", "200")
    assert int(retried["latency"]) >= 50  # the receiver took 50 ms to answer
    retry_at = datetime.fromisoformat(retried["next"])
    assert retry_at > datetime.fromisoformat(retried["started"])  # when the retry was scheduled
    assert retry_at <= datetime.fromisoformat(delivered["started"])  # and it was not made before then
    assert delivered["next"] == "-"  # nothing more to do


async def test_list_says_so_when_a_tenant_has_no_endpoint(cli: Cli) -> None:
    result = await cli("list", "--tenant", "globex")

    assert result.exit_code == 0, result.output
    assert result.output == (
        "tenant globex has no webhook endpoints "
        "(webhook_url or [[tenants.<id>.webhooks]] in the tenants file)\n"
    )


async def _answered(receiver: Receiver, status: int) -> bool:
    return any(request.answered == status for request in receiver.received)


async def test_a_tenant_subscribes_several_endpoints_to_chosen_event_types(
    sqlite_url: str, tmp_path: Path
) -> None:
    other = generate_secret()
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f'[tenants.acme]\npay_to = "{PAY_TO}"\nprice = 1000\n'
        f'webhook_url = "https://acme.example/all"\nwebhook_secret = "{SECRET}"\n'
        "[[tenants.acme.webhooks]]\n"
        f'url = "https://acme.example/reversals"\nsecret = "{other}"\n'
        'event_types = ["settlement.reversed", "settlement.failed"]\n'
        "[[tenants.acme.webhooks]]\n"
        f'url = "https://billing.acme.example/hook"\nsecret = "{SECRET}"\n'
    )

    configs = endpoint_configs(TenantRegistry.from_toml(tenants))
    listed = await Cli(sqlite_url, tenants)("list", "--tenant", "acme")  # syncs the file
    engine = create_engine(sqlite_url)
    stored = await WebhookEndpoints(engine).list("acme")
    await engine.dispose()

    assert configs == [
        EndpointConfig("acme", "https://acme.example/all", SECRET),
        EndpointConfig(
            "acme", "https://acme.example/reversals", other, ("settlement.reversed", "settlement.failed")
        ),
        EndpointConfig("acme", "https://billing.acme.example/hook", SECRET),
    ]
    assert listed.exit_code == 0, listed.output
    assert {(endpoint.url, endpoint.event_types) for endpoint in stored} == {
        ("https://acme.example/all", ()),
        ("https://acme.example/reversals", ("settlement.failed", "settlement.reversed")),
        ("https://billing.acme.example/hook", ()),
    }
    assert next(e for e in stored if e.url.endswith("reversals")).secret == other


_BAD_SUBSCRIPTIONS = [
    ('url = "https://a.example/h"', "tenants.acme.webhooks[0].secret: is required"),
    (f'url = "ftp://a.example/h"\nsecret = "{SECRET}"', "webhooks[0].url: must be an absolute http(s)"),
    ('url = "https://a.example/h"\nsecret = "whsec_x"', "webhooks[0].secret: must be whsec_"),
    (
        f'url = "https://a.example/h"\nsecret = "{SECRET}"\nevent_types = "settlement.failed"',
        "webhooks[0].event_types: must be an array",
    ),
    (
        f'url = "https://a.example/h"\nsecret = "{SECRET}"\nevent_types = ["Settlement Failed"]',
        "webhooks[0].event_types: str 'Settlement Failed' is not an event type name",
    ),
    (
        f'url = "https://acme.example/all"\nsecret = "{SECRET}"',
        "webhooks[0].url: https://acme.example/all is configured more than once",
    ),
    (f'url = "https://a.example/h"\nsecret = "{SECRET}"\ncolour = 1', "webhooks[0].colour: unknown key"),
]


# Named by the problem: the entries hold a secret made at run time, and test ids must not change between
# collections (parallel workers each collect the suite).
@pytest.mark.parametrize(("entry", "problem"), _BAD_SUBSCRIPTIONS, ids=[p for _, p in _BAD_SUBSCRIPTIONS])
def test_bad_webhook_subscriptions_are_refused_with_their_key_path(
    tmp_path: Path, entry: str, problem: str
) -> None:
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f'[tenants.acme]\npay_to = "{PAY_TO}"\nprice = 1000\n'
        f'webhook_url = "https://acme.example/all"\nwebhook_secret = "{SECRET}"\n'
        f"[[tenants.acme.webhooks]]\n{entry}\n"
    )

    with pytest.raises(TenantConfigError) as raised:
        TenantRegistry.from_toml(tenants)

    assert any(problem in line for line in raised.value.problems), raised.value.problems
    assert SECRET not in str(raised.value)


async def test_an_unknown_subscribed_event_type_stops_the_sync_before_any_write(
    sqlite_url: str, tmp_path: Path
) -> None:
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(
        f'[tenants.acme]\npay_to = "{PAY_TO}"\nprice = 1000\n'
        f'[[tenants.acme.webhooks]]\nurl = "https://a.example/h"\nsecret = "{SECRET}"\n'
        'event_types = ["settlement.refunded"]\n'
    )
    engine = create_engine(sqlite_url)

    with pytest.raises(InvalidEventError):
        await WebhookEndpoints(engine).sync(endpoint_configs(TenantRegistry.from_toml(tenants)))
    listed = await Cli(sqlite_url, tenants)("list", "--tenant", "acme")
    stored = await WebhookEndpoints(engine).list()
    await engine.dispose()

    assert listed.exit_code == 2 and "unknown event type" in listed.output
    assert stored == []


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
    assert unknown.exit_code == 2 and "tenant 'globex' has 0 endpoints" in unknown.output


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
    assert missing.exit_code == 2 and "no event" in missing.output
    assert enabled.output == f"endpoint {endpoint.id} active\n" and endpoint.active


async def test_worker_refuses_a_lease_shorter_than_the_timeout(cli: Cli) -> None:
    result = await cli("worker", "--lease", "5", "--timeout", "10")
    barely = await cli("worker", "--lease", "10.2", "--timeout", "10")  # no room for the claim itself

    assert result.exit_code == 2 and "--lease" in result.output
    assert barely.exit_code == 2 and "at least the attempt deadline (--timeout) + 0.5 s" in barely.output
