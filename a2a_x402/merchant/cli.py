"""`x402-merchant`: serve the reference merchant and operate its database, ledger and webhooks.

Settings come from `X402_*` environment variables (and `.env`); see docs/reference/settings.md.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING, TypedDict

import click
import uvicorn

from a2a_x402 import cli
from a2a_x402.agentcard import AgentCardError, KeyStore
from a2a_x402.facilitator import ChainMismatchError, ChainUnavailableError
from a2a_x402.observability import (
    AccessLogMiddleware,
    LogSettings,
    configure_logging,
    redact_values,
    render_checks,
    settings_secrets,
)
from a2a_x402.storage import DatabaseUnavailableError, DatabaseUrlError, SchemaOutdatedError

from .edge import GrpcListenError
from .tenants import TenantConfigError, UnknownTenantError
from .webhooks import WebhookError

if TYPE_CHECKING:
    from .reconciler import ReconcileReport
    from .settings import MerchantSettings

# Each command imports what only it uses in its body, and the groups of the sub-packages are loaded when the
# command line reaches them: `x402-merchant differences list` starts no A2A app, chain client or key library.
_SUBCOMMANDS = {
    "ap2-keys": "a2a_x402.merchant._ap2_keys_cli:ap2_keys_cli",
    "callers": "a2a_x402.merchant.callers.cli:callers_cli",
    "differences": "a2a_x402.merchant.differences.cli:differences_cli",
    "ledger": "a2a_x402.merchant.ledger.cli:ledger_cli",
    "webhooks": "a2a_x402.merchant.webhooks.cli:webhooks_cli",
}
_GRPC_PORT_SETTING = "X402_GRPC_PORT / --grpc-port"

MISTAKES: cli.Mistakes = {
    AgentCardError: None,
    ChainMismatchError: None,
    ChainUnavailableError: None,
    DatabaseUnavailableError: "X402_DATABASE_URL",
    DatabaseUrlError: "X402_DATABASE_URL",
    GrpcListenError: _GRPC_PORT_SETTING,
    SchemaOutdatedError: "X402_DATABASE_URL",
    TenantConfigError: "X402_TENANTS_FILE",
    UnknownTenantError: None,
    WebhookError: None,
}
"""What every `x402-merchant` command answers as its user's mistakes, beside `cli.ConfigError` and settings
errors; each group of `_SUBCOMMANDS` adds its own (`CallerKeyError`, ...) once it is loaded."""


KEEP_ALIVE_S = 30
"""How long an idle client connection is kept open: longer than clients keep idle connections for reuse
(httpx: 5 s), so a client never sends a request on a connection the server is closing at that moment."""
_SWITCH_INTERVAL_S = 0.0005
"""The interpreter's thread switch interval while serving (see `serve`)."""


def header_limits(settings: MerchantSettings) -> cli.HeaderLimits:
    """The HTTP server's header bounds from `settings`, for `cli.bounded_http_protocol`."""
    return cli.HeaderLimits(
        header_timeout_s=settings.header_timeout_s,
        max_header_count=settings.max_header_count,
        max_header_bytes=settings.max_header_bytes,
    )


class _ServeOverrides(TypedDict, total=False):
    """The settings `serve` options override; an option left out keeps the environment's value."""

    host: str
    port: int
    grpc_port: int


@click.group(cls=cli.Group, mistakes=MISTAKES, lazy=_SUBCOMMANDS)
@click.version_option(package_name="a2a-x402-merchant", prog_name="x402-merchant")
def main() -> None:
    """The x402 reference merchant: a paid A2A 1.0 agent with a ledger and billing webhooks."""


@main.command()
@click.option("--host", default=None, help="interface to bind (default X402_HOST or 127.0.0.1)")
@click.option("--port", type=int, default=None, help="port (default X402_PORT or 8000)")
@click.option("--grpc-port", type=int, default=None, help="gRPC port (default X402_GRPC_PORT: off)")
@click.option("--migrate/--no-migrate", default=False, help="upgrade the database schema first")
def serve(host: str | None, port: int | None, grpc_port: int | None, migrate: bool) -> None:
    """Serve the A2A routes (JSON-RPC, HTTP+JSON and, with a gRPC port, gRPC), the Agent Card and the
    per-tenant billing API. The gRPC server starts and stops with the HTTP one, on the same host.

    Runs the checks of `check` first and refuses to start (exit 2) on a fatal problem."""
    from a2a_x402.facilitator import refuse_on_fatal
    from a2a_x402.storage import upgrade_schema

    from .app import build_app
    from .checks import check_merchant
    from .settings import MerchantSettings

    overrides: _ServeOverrides = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if grpc_port is not None:
        overrides["grpc_port"] = grpc_port
    settings = cli.load_settings(MerchantSettings, **overrides)
    log_settings = cli.load_settings(LogSettings)
    # Bound first: a busy port is one line, before anything is migrated or opened. The gRPC server binds its
    # own socket in the app's lifespan, so its port is only checked here.
    listener = cli.bind_listener(settings.host, settings.port)
    with listener:
        if settings.grpc_port is not None:
            cli.check_listenable(settings.host, settings.grpc_port, port_setting=_GRPC_PORT_SETTING)
        if migrate:
            asyncio.run(upgrade_schema(settings.database_url))
        checked = asyncio.run(check_merchant(settings))
        logs = configure_logging(log_settings)
        refuse_on_fatal(checked)
        app = build_app(settings)
        config = uvicorn.Config(
            AccessLogMiddleware(app) if logs.access_log else app,
            log_config=None,  # uvicorn's own lines go through the handler configure_logging installed
            log_level="warning",
            access_log=False,
            timeout_keep_alive=KEEP_ALIVE_S,
            http=cli.bounded_http_protocol(header_limits(settings)),
        )
        # SQLite's writes run on threads (the writer's groups, aiosqlite's connections), and a thread done
        # with one waits for the GIL up to the switch interval (5 ms by default) while the event loop
        # runs: at 32 concurrent paid tasks those waits were most of the time the write lock was held.
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        cli.Server(config).run(sockets=[listener])


@main.group()
def db() -> None:
    """The merchant database's schema (Alembic migrations are the only way it is made)."""


@db.command()
def upgrade() -> None:
    """Create or upgrade every table (tasks, offers, ledger, outbox, claims) in X402_DATABASE_URL."""
    from a2a_x402.storage import printable_url, upgrade_schema

    from .ledger.cli import LedgerSettings

    url = cli.load_settings(LedgerSettings).database_url
    done = asyncio.run(upgrade_schema(url))
    click.echo(f"schema in {printable_url(url)}: {done.describe()}")


@main.command()
def check() -> None:
    """Check the configuration against the node, the database and its files without serving.

    The asset has code and its name()/version() are X402_ASSET_NAME/X402_ASSET_VERSION, the node serves
    X402_NETWORK, the relayer is funded (or the remote facilitator answers), the database is migrated, the
    tenants file is valid and prices only offered skills, webhook URLs pass the address rules, and the card
    signing keys sign. Prints a table; exits 1 on any problem, 0 when every check passes.
    """
    from .checks import check_merchant
    from .settings import MerchantSettings

    settings = cli.load_settings(MerchantSettings)
    cli.load_settings(LogSettings)  # serve's log settings are checked too, though check logs nothing
    results = asyncio.run(check_merchant(settings))
    click.echo(render_checks(results))
    if not all(result.ok for result in results):
        raise SystemExit(1)


@main.command()
def reconcile() -> None:
    """One reconciliation pass: finish in-flight settlements and paid turns, match the chain's payments to
    the tenants' payTo addresses with the ledger, finalize or reverse bookings.

    Exits 1 when a difference could not be resolved (each is printed on stderr), 0 otherwise.
    """
    from ._preflight import preflight
    from .settings import MerchantSettings

    settings = cli.load_settings(MerchantSettings)
    log_settings = cli.load_settings(LogSettings)
    asyncio.run(preflight(settings))
    configure_logging(log_settings)
    redact_values(settings_secrets(settings))
    report = asyncio.run(_reconcile_once(settings))
    click.echo(
        f"claims moved {report.claims_moved}, paid turns finished {report.turns_finished}, "
        f"booked late {report.booked_late}, booked from the chain {report.booked_from_chain}, "
        f"finalized {report.finalized}, reversed {report.reversed}"
    )
    for problem in report.unresolved:
        click.echo(f"unresolved: {problem}", err=True)
    if report.unresolved:
        raise SystemExit(1)


async def _reconcile_once(settings: MerchantSettings) -> ReconcileReport:
    from a2a_x402.facilitator import Facilitator, HttpFacilitatorClient
    from a2a_x402.storage import create_engine

    from .ap2 import MandateUsageStore
    from .ledger import Ledger
    from .payments import OfferStore
    from .webhooks import Outbox
    from .wiring import build_reconciler

    engine = create_engine(settings.database_url)
    facilitator = (
        HttpFacilitatorClient(settings.facilitator_url, api_key=settings.remote_facilitator_key())
        if settings.facilitator_url
        else Facilitator.from_settings(settings.facilitator_settings(), engine=engine)
    )
    try:
        ledger = Ledger(engine, Outbox(engine))
        reconciler = build_reconciler(
            settings,
            engine=engine,
            facilitator=facilitator,
            offers=OfferStore(engine, events=Outbox(engine), usage=MandateUsageStore(engine)),
            ledger=ledger,
        )
        try:
            return await reconciler.run_once()
        finally:
            await reconciler.aclose()
    finally:
        await facilitator.aclose()
        await engine.dispose()


@main.group()
def keys() -> None:
    """Agent Card signing keys in X402_CARD_KEYS_DIR (the card is signed with every active key)."""


def _key_store() -> KeyStore:
    directory = os.environ.get("X402_CARD_KEYS_DIR")
    if not directory:
        raise cli.ConfigError(
            "is not set: set it to the directory holding the card signing keys", variable="X402_CARD_KEYS_DIR"
        )
    return KeyStore(directory)


@keys.command()
@click.option("--alg", type=click.Choice(["ES256", "EdDSA"]), default="ES256", show_default=True)
def generate(alg: str) -> None:
    """Create a new active signing key (existing keys keep signing)."""
    record = _key_store().generate(alg)
    click.echo(f"generated {record.alg} key {record.kid}")


@keys.command()
def rotate() -> None:
    """Add a new active key like the newest one; both sign until the old one is retired."""
    record = _key_store().rotate()
    click.echo(
        f"rotated: new key {record.kid} signs beside the previous ones; retire them when caches expire"
    )


# A kid is a base64url thumbprint and one in 64 starts with "-": read it as the argument, not an option.
@keys.command(context_settings={"ignore_unknown_options": True})
@click.argument("kid")
def retire(kid: str) -> None:
    """Stop signing with KID and drop it from the published JWKS."""
    record = _key_store().retire(kid)
    click.echo(f"retired key {record.kid}")


@keys.command("list")
def list_keys() -> None:
    """Every key, newest first."""
    store = _key_store()
    if not store.directory.is_dir():
        raise cli.ConfigError(
            f"names no directory ({store.directory}), so there are no keys: "
            "run `x402-merchant keys generate` to create it with a first key",
            variable="X402_CARD_KEYS_DIR",
        )
    records = store.records()
    for record in records:
        click.echo(
            f"{record.kid}  {record.alg}  {record.status.value}  created {record.created_at:%Y-%m-%d %H:%M}"
        )
