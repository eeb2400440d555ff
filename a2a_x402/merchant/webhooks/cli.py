"""`webhooks` commands (mounted under `x402-merchant`): list, redeliver, rotate-secret, test, enable, worker.

Settings: `X402_DATABASE_URL` (the merchant database, migrated to the `merchant` head),
`X402_TENANTS_FILE` (the tenants TOML; every command first syncs the endpoints from it) and
`X402_WEBHOOKS_ALLOW_PRIVATE` (development only: let deliveries reach private addresses).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import click
import httpx
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402 import cli
from a2a_x402.merchant.tenants import (
    TenantConfigError,
    TenantRegistry,
    UnknownTenantError,
    tenant_id_of,
    tenant_name,
)
from a2a_x402.storage import (
    DEFAULT_DATABASE_URL,
    DatabaseUnavailableError,
    DatabaseUrlError,
    SchemaOutdatedError,
    create_engine,
    ensure_schema_current,
)

from ._delivery import LEASE_MARGIN_S, DeliveryWorker
from ._endpoints import DEFAULT_ROTATION_OVERLAP, EndpointConfig, WebhookEndpoints
from ._errors import WebhookError
from ._outbox import Outbox
from ._probe import send_test_event
from ._sender import REQUEST_TIMEOUT_S

__all__ = ["MISTAKES", "WebhookSettings", "endpoint_configs", "webhooks_cli"]

_T = TypeVar("_T")

MISTAKES: cli.Mistakes = {
    DatabaseUrlError: "X402_DATABASE_URL",
    DatabaseUnavailableError: "X402_DATABASE_URL",
    SchemaOutdatedError: "X402_DATABASE_URL",
    TenantConfigError: "X402_TENANTS_FILE",
    UnknownTenantError: None,
    WebhookError: None,
}
"""What the webhook commands answer as their user's mistakes (an unknown tenant, endpoint or event, a bad
secret or event type in the tenants file, the database)."""
_TENANT_OPTION = click.option(
    "--tenant",
    "name",
    default="default",
    show_default=True,
    help="tenant id, as in the billing API's /tenants/<id> (default: the default tenant)",
)


class WebhookSettings(BaseSettings):
    """The webhook commands' settings, from `X402_*` environment variables."""

    model_config = SettingsConfigDict(env_prefix="X402_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL, description="SQLAlchemy URL of the merchant database"
    )
    tenants_file: str | None = Field(default=None, description="the tenants TOML that seeds the endpoints")
    webhooks_allow_private: bool = Field(
        default=False,
        description="let deliveries reach private, loopback and link-local addresses (development only)",
    )


def endpoint_configs(registry: TenantRegistry) -> list[EndpointConfig]:
    """Every webhook endpoint of every tenant, with the event types it subscribes to."""
    return [
        EndpointConfig(tenant=tenant.id, url=hook.url, secret=hook.secret, event_types=hook.event_types)
        for tenant in registry
        for hook in tenant.webhook_endpoints
    ]


def _run(action: Callable[[AsyncEngine, WebhookSettings], Awaitable[_T]], name: str | None = None) -> _T:
    """Run `action` on the merchant database after syncing the endpoints from the tenants file; with a
    tenant `name`, an unknown tenant is refused before anything is synced."""

    async def main() -> _T:
        settings = cli.load_settings(WebhookSettings)
        await ensure_schema_current(settings.database_url, "merchant")
        engine = create_engine(settings.database_url)
        try:
            if name is not None:
                await _tenant(engine, settings, name)
            if settings.tenants_file:
                registry = await asyncio.to_thread(TenantRegistry.from_toml, settings.tenants_file)
                await WebhookEndpoints(engine).sync(endpoint_configs(registry))
            return await action(engine, settings)
        finally:
            await engine.dispose()

    return asyncio.run(main())


async def _tenant(engine: AsyncEngine, settings: WebhookSettings, name: str) -> str:
    """The id of the tenant `name` means (`default`: the default tenant); raises UnknownTenantError for one
    neither configured nor holding an endpoint."""
    tenant_id = tenant_id_of(name)
    configured = await asyncio.to_thread(TenantRegistry.configured_ids, settings.tenants_file)
    known = configured | {endpoint.tenant for endpoint in await WebhookEndpoints(engine).list()}
    if tenant_id not in known:
        raise UnknownTenantError(tenant_id, sorted(known))
    return tenant_id


def _when(value: object) -> str:
    return "-" if value is None else str(value)


@click.group("webhooks", cls=cli.Group, mistakes=MISTAKES)
def webhooks_cli() -> None:
    """Billing webhooks: endpoints, the delivery log, redelivery, secret rotation and the delivery worker."""


@webhooks_cli.command("list")
@_TENANT_OPTION
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="log lines")
def list_(name: str, limit: int) -> None:
    """The tenant's endpoints and its most recent delivery attempts."""

    async def action(engine: AsyncEngine, settings: WebhookSettings) -> None:
        tenant = await _tenant(engine, settings, name)
        endpoints = await WebhookEndpoints(engine).list(tenant)
        if not endpoints:
            click.echo(
                f"tenant {tenant_name(tenant)} has no webhook endpoints "
                "(webhook_url or [[tenants.<id>.webhooks]] in the tenants file)"
            )
        for endpoint in endpoints:
            reason = f" ({endpoint.disabled_reason})" if endpoint.disabled_reason else ""
            rotating = " [rotating secret]" if endpoint.previous_secret_expires_at else ""
            click.echo(f"endpoint {endpoint.id} {endpoint.status}{reason}{rotating} {endpoint.url}")
        for entry in await Outbox(engine).delivery_log(tenant, limit=limit):
            click.echo(
                f"{entry.started_at.isoformat()} {entry.event_id} {entry.event_type} -> {entry.endpoint_id} "
                f"attempt {entry.attempt}: {entry.outcome} status={_when(entry.status_code)} "
                f"{_when(entry.latency_ms)} ms error={_when(entry.error)} next={_when(entry.next_attempt_at)}"
            )

    _run(action, name)


@webhooks_cli.command()
@click.argument("event_id")
@_TENANT_OPTION
def redeliver(event_id: str, name: str) -> None:
    """Send EVENT_ID again to the tenant's active endpoints (a new round of retries)."""

    async def action(engine: AsyncEngine, settings: WebhookSettings) -> int:
        return await Outbox(engine).redeliver(await _tenant(engine, settings, name), event_id)

    count = _run(action, name)
    click.echo(f"{event_id} queued for {count} endpoint(s)")


@webhooks_cli.command("rotate-secret")
@_TENANT_OPTION
@click.option(
    "--endpoint", "endpoint_id", default=None, help="endpoint id (needed if the tenant has several)"
)
@click.option("--secret", default=None, help="the new whsec_ secret (default: a fresh random one)")
@click.option(
    "--overlap-hours",
    type=click.FloatRange(0, 24 * 30),
    default=DEFAULT_ROTATION_OVERLAP.total_seconds() / 3600,
    show_default=True,
    help="how long the old secret keeps signing",
)
def rotate_secret(name: str, endpoint_id: str | None, secret: str | None, overlap_hours: float) -> None:
    """Make a new signing secret current; both sign until the overlap ends. Prints the new secret."""

    async def action(engine: AsyncEngine, settings: WebhookSettings) -> str:
        endpoints = WebhookEndpoints(engine)
        endpoint = await endpoints.resolve(await _tenant(engine, settings, name), endpoint_id)
        rotated = await endpoints.rotate_secret(
            endpoint.id, new_secret=secret, overlap=timedelta(hours=overlap_hours)
        )
        return rotated.secret

    click.echo(_run(action, name))


@webhooks_cli.command()
@_TENANT_OPTION
def test(name: str) -> None:
    """Send a signed webhook.test event to each of the tenant's active endpoints now and show the answers."""

    async def action(engine: AsyncEngine, settings: WebhookSettings) -> bool:
        tenant = await _tenant(engine, settings, name)
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client:
            results = await send_test_event(
                engine, client, tenant, allow_private_targets=settings.webhooks_allow_private
            )
        for result in results:
            click.echo(
                f"{result.endpoint_id} {result.url}: status={_when(result.status_code)} "
                f"{result.latency_ms} ms error={_when(result.error)}"
            )
        return bool(results) and all(result.ok for result in results)

    if not _run(action, name):
        raise click.ClickException("not every endpoint accepted the test event")


@webhooks_cli.command()
@_TENANT_OPTION
@click.option(
    "--endpoint", "endpoint_id", default=None, help="endpoint id (needed if the tenant has several)"
)
def enable(name: str, endpoint_id: str | None) -> None:
    """Resume deliveries to a disabled endpoint (after a 410, say). Events booked while it was disabled are
    not queued: redeliver them, or let the receiver replay them."""

    async def action(engine: AsyncEngine, settings: WebhookSettings) -> str:
        endpoints = WebhookEndpoints(engine)
        endpoint = await endpoints.resolve(await _tenant(engine, settings, name), endpoint_id)
        return (await endpoints.enable(endpoint.id)).id

    click.echo(f"endpoint {_run(action, name)} active")


@webhooks_cli.command()
@click.option(
    "--batch-size", type=click.IntRange(1, 500), default=20, show_default=True, help="sends in flight at most"
)
@click.option(
    "--endpoint-concurrency",
    type=click.IntRange(1, 500),
    default=5,
    show_default=True,
    help="sends in flight to one endpoint at most",
)
@click.option(
    "--poll-interval", type=click.FloatRange(0.01, 60), default=1.0, show_default=True, help="seconds"
)
@click.option(
    "--lease", type=click.FloatRange(1, 3600), default=60.0, show_default=True, help="claim lease, seconds"
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 60),
    default=REQUEST_TIMEOUT_S,
    show_default=True,
    help="deadline of one attempt, DNS lookup included, seconds",
)
def worker(
    batch_size: int, endpoint_concurrency: int, poll_interval: float, lease: float, timeout: float
) -> None:
    """Deliver the outbox until SIGINT or SIGTERM (any number of workers, in any number of replicas)."""
    if lease < timeout + LEASE_MARGIN_S:
        raise click.BadParameter(
            f"the lease must be at least the attempt deadline (--timeout) + {LEASE_MARGIN_S:g} s",
            param_hint="--lease",
        )

    async def action(engine: AsyncEngine, settings: WebhookSettings) -> None:
        stop = asyncio.Event()
        received: list[str] = []

        def stopping(signum: signal.Signals) -> None:
            received.append(signum.name)
            stop.set()

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(signum, stopping, signum)
        async with httpx.AsyncClient(timeout=timeout) as client:
            delivery = DeliveryWorker(
                engine,
                client,
                allow_private_targets=settings.webhooks_allow_private,
                lease_s=lease,
                batch_size=batch_size,
                endpoint_concurrency=endpoint_concurrency,
                timeout_s=timeout,
            )
            click.echo(f"webhook worker {delivery.worker_id} started", err=True)
            await delivery.run(stop, poll_interval_s=poll_interval)
        if received:  # a stop asked for, said once: a send cut off at the drain is sent again after its lease
            click.echo(f"webhook worker {delivery.worker_id} stopped by {received[0]}", err=True)

    _run(action)
