"""`x402-merchant`: serve the reference merchant and operate its database, ledger and webhooks.

Settings come from `X402_*` environment variables (and `.env`); see the README's settings table.
"""

from __future__ import annotations

import asyncio
import logging

import click
import uvicorn

from storage import upgrade_schema

from .app import build_app
from .ledger import ledger_cli
from .ledger.cli import LedgerSettings
from .settings import MerchantSettings
from .webhooks import webhooks_cli


@click.group()
def main() -> None:
    """The x402 reference merchant: a paid A2A 1.0 agent with a ledger and billing webhooks."""


@main.command()
@click.option("--host", default=None, help="interface to bind (default X402_HOST or 127.0.0.1)")
@click.option("--port", type=int, default=None, help="port (default X402_PORT or 8000)")
@click.option("--migrate/--no-migrate", default=False, help="upgrade the database schema first")
def serve(host: str | None, port: int | None, migrate: bool) -> None:
    """Serve the A2A routes, the Agent Card and the per-tenant billing API."""
    overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    settings = MerchantSettings(**overrides)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if migrate:
        asyncio.run(upgrade_schema(settings.database_url))
    uvicorn.run(
        build_app(settings), host=settings.host, port=settings.port, log_level="warning", access_log=False
    )


@main.group()
def db() -> None:
    """The merchant database's schema (Alembic migrations are the only way it is made)."""


@db.command()
def upgrade() -> None:
    """Create or upgrade every table (tasks, offers, ledger, outbox, claims) in X402_DATABASE_URL."""
    url = LedgerSettings().database_url
    asyncio.run(upgrade_schema(url))
    click.echo(f"schema is up to date in {url}")


main.add_command(ledger_cli)
main.add_command(webhooks_cli)
