"""`x402-facilitator`: run the facilitator HTTP service and manage its database."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
import uvicorn

from a2a_x402 import cli
from a2a_x402.observability import (
    AccessLogMiddleware,
    LogSettings,
    configure_logging,
    redact_values,
    render_checks,
    settings_secrets,
)
from a2a_x402.storage import (
    DatabaseUnavailableError,
    DatabaseUrlError,
    SchemaOutdatedError,
    create_engine,
    ensure_schema_current,
    printable_url,
    upgrade_schema,
)

from ._api_keys import ApiKeyStore, KeyRules
from ._config import FacilitatorSettings
from ._errors import ChainMismatchError, ChainUnavailableError

# `serve` and `check` import the service and its probes in their bodies: the chain client, the HTTP app and
# the key libraries would cost the `keys` and `db` commands seconds of start-up they never use.

MISTAKES: cli.Mistakes = {
    ChainMismatchError: None,
    ChainUnavailableError: None,
    DatabaseUrlError: "X402_DATABASE_URL",
    DatabaseUnavailableError: "X402_DATABASE_URL",
    SchemaOutdatedError: "X402_DATABASE_URL",
}
"""What `x402-facilitator` answers as its user's mistakes, beside `cli.ConfigError` and settings errors."""


def _settings(*, relayer_key: bool = False) -> FacilitatorSettings:
    """The settings from the environment and `.env` (the relayer key loaded when `relayer_key`).

    Raises:
        cli.ConfigError: a setting is missing or invalid.
    """
    settings = cli.load_settings(FacilitatorSettings)
    if relayer_key:
        settings.relayer_private_key()
    return settings


T = TypeVar("T")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


def header_limits(settings: FacilitatorSettings) -> cli.HeaderLimits:
    """The HTTP server's header bounds from `settings` (`X402_FACILITATOR_*HEADER*`), for
    `cli.bounded_http_protocol`."""
    return cli.HeaderLimits(
        header_timeout_s=settings.facilitator_header_timeout_s,
        max_header_count=settings.facilitator_max_header_count,
        max_header_bytes=settings.facilitator_max_header_bytes,
    )


KEEP_ALIVE_S = 30
"""How long an idle client connection is kept open: longer than clients keep idle connections for reuse
(httpx: 5 s), so a client never sends a request on a connection the server is closing at that moment."""


@click.group(cls=cli.Group, mistakes=MISTAKES)
@click.version_option(package_name="a2a-x402-merchant", prog_name="x402-facilitator")
def main() -> None:
    """An x402 facilitator for EIP-3009 payments on an EVM chain (settings from X402_* variables)."""


@main.command()
@click.option("--host", default=None, help="interface to bind (default X402_HOST or 127.0.0.1)")
@click.option("--port", type=int, default=None, help="port (default X402_PORT or 4022)")
@click.option("--migrate/--no-migrate", default=False, help="upgrade the claim store's schema first")
def serve(host: str | None, port: int | None, migrate: bool) -> None:
    """Serve POST /verify, POST /settle, GET /supported, GET /healthz, GET /readyz and GET /metrics."""
    from ._app import create_app
    from ._checks import refuse_on_fatal
    from ._health import check_facilitator

    settings = _settings(relayer_key=True)
    settings = settings.model_copy(
        update={"host": host or settings.host, "port": settings.port if port is None else port}
    )
    log_settings = cli.load_settings(LogSettings)
    # Bound first: a busy port is one line, before anything is migrated or opened.
    listener = cli.bind_listener(settings.host, settings.port)
    with listener:
        if migrate:
            asyncio.run(upgrade_schema(settings.database_url, "facilitator"))
        checked = asyncio.run(check_facilitator(settings))
        logs = configure_logging(log_settings)
        redact_values(settings_secrets(settings))  # whatever would log them, they never reach a line
        refuse_on_fatal(checked)
        app = create_app(settings=settings)
        config = uvicorn.Config(
            AccessLogMiddleware(app) if logs.access_log else app,
            log_config=None,  # uvicorn's own lines go through the handler configure_logging installed
            log_level="warning",
            access_log=False,
            timeout_keep_alive=KEEP_ALIVE_S,
            # Headers bounded in count, size and arrival time, as the merchant's: a client sending half its
            # headers is cut off instead of holding a connection for ever.
            http=cli.bounded_http_protocol(header_limits(settings)),
        )
        cli.Server(config).run(sockets=[listener])


@main.group()
def db() -> None:
    """The claim store's schema."""


@db.command()
def upgrade() -> None:
    """Create or upgrade the claim store's tables (X402_DATABASE_URL)."""
    settings = _settings()
    done = asyncio.run(upgrade_schema(settings.database_url, "facilitator"))
    click.echo(f"facilitator schema in {printable_url(settings.database_url)}: {done.describe()}")


@main.command()
def check() -> None:
    """Check the configuration against the node and the database without serving: the node serves
    X402_NETWORK, the relayer key is usable and funded (X402_RELAYER_MIN_BALANCE_WEI), the claim store is
    migrated. Prints a table; exits 1 on any problem, 0 when every check passes."""
    from ._health import check_facilitator

    settings = _settings()
    cli.load_settings(LogSettings)  # serve's log settings are checked too, though check logs nothing
    results = asyncio.run(check_facilitator(settings))
    click.echo(render_checks(results))
    if not all(result.ok for result in results):
        raise SystemExit(1)


@main.group()
def keys() -> None:
    """The API keys of the callers of /verify and /settle (in the claim store, X402_DATABASE_URL)."""


def _address(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        if not _ADDRESS.match(value):
            raise click.BadParameter(f"{value!r} is not a 0x-prefixed 20-byte hex address")
    return values


@keys.command("create")
@click.option("--name", required=True, help="who the key is for (shown by `keys list`)")
@click.option("--pay-to", multiple=True, callback=_address, help="only settle to this payTo (repeatable)")
@click.option("--asset", multiple=True, callback=_address, help="only settle this asset (repeatable)")
@click.option("--min-amount", type=click.IntRange(min=0), default=0, help="smallest amount (atomic units)")
@click.option(
    "--settles-per-minute",
    type=click.IntRange(min=1),
    default=None,
    help="at most this many settles a minute (per process)",
)
def keys_create(
    name: str,
    pay_to: tuple[str, ...],
    asset: tuple[str, ...],
    min_amount: int,
    settles_per_minute: int | None,
) -> None:
    """Create an API key and print it (alone on stdout), once: only its digest is stored, so it cannot be
    shown again."""
    if not 0 < len(name) <= 80:
        raise click.BadParameter("must be 1 to 80 characters", param_hint="--name")
    rules = KeyRules(pay_to, asset, min_amount, settles_per_minute)
    record, key = asyncio.run(_with_store(lambda store: store.create(name, rules)))
    # The key alone on stdout (`> file` keeps it), what it is on stderr.
    click.echo(f"created key {record.id} ({name}; {rules.describe()}); it is shown only now:", err=True)
    click.echo(key)


@keys.command("list")
def keys_list() -> None:
    """List every key: id, name, created, revoked, rules (never the key)."""
    records = asyncio.run(_with_store(lambda store: store.all()))
    if not records:
        click.echo("no API keys: create one with `x402-facilitator keys create --name <caller>`")
        return
    for record in records:
        revoked = f"revoked {record.revoked_at:%Y-%m-%d %H:%M}" if record.revoked_at else "live"
        created = f"{record.created_at:%Y-%m-%d %H:%M}"
        click.echo(f"{record.id}  {record.name}  created {created}  {revoked}  {record.rules.describe()}")


@keys.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke the key KEY_ID (as `keys list` shows it): callers presenting it are refused from now on."""
    if not asyncio.run(_with_store(lambda store: store.revoke(key_id))):
        raise cli.ConfigError(f"there is no live key {key_id}: see `x402-facilitator keys list`")
    click.echo(f"revoked key {key_id}")


async def _with_store(use: Callable[[ApiKeyStore], Awaitable[T]]) -> T:
    """`use` on the key store of X402_DATABASE_URL, whose schema must be current."""
    settings = _settings()
    await ensure_schema_current(settings.database_url, "facilitator")
    engine = create_engine(settings.database_url)
    try:
        return await use(ApiKeyStore(engine))
    finally:
        await engine.dispose()
