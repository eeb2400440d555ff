"""`x402-merchant`: serve the reference merchant and operate its database, ledger and webhooks.

Settings come from `X402_*` environment variables (and `.env`); see the README's settings table.
"""

from __future__ import annotations

import asyncio
import logging
import os

import click
import uvicorn

from agentcard import KeyStore
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


@main.group()
def keys() -> None:
    """Agent Card signing keys in X402_CARD_KEYS_DIR (the card is signed with every active key)."""


def _key_store() -> KeyStore:
    directory = os.environ.get("X402_CARD_KEYS_DIR")
    if not directory:
        raise click.UsageError("set X402_CARD_KEYS_DIR to the directory holding the card signing keys")
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


@keys.command()
@click.argument("kid")
def retire(kid: str) -> None:
    """Stop signing with KID and drop it from the published JWKS."""
    record = _key_store().retire(kid)
    click.echo(f"retired key {record.kid}")


@keys.command("list")
def list_keys() -> None:
    """Every key, newest first."""
    for record in _key_store().records():
        click.echo(
            f"{record.kid}  {record.alg}  {record.status.value}  created {record.created_at:%Y-%m-%d %H:%M}"
        )


main.add_command(ledger_cli)
main.add_command(webhooks_cli)
