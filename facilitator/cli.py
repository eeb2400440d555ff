"""`x402-facilitator`: run the facilitator HTTP service and manage its database."""

from __future__ import annotations

import asyncio

import click
import uvicorn
from pydantic import ValidationError

from observability import AccessLogMiddleware, LogSettingsError, configure_logging
from storage import upgrade_schema

from ._app import create_app
from ._config import FacilitatorSettings


def _settings(*, relayer_key: bool = False) -> FacilitatorSettings:
    """The settings from the environment and `.env`; a bad or missing one is a one-line error."""
    try:
        settings = FacilitatorSettings()
        if relayer_key:
            settings.relayer_private_key()
    except ValidationError as exc:
        problems = "; ".join(
            f"X402_{'_'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
            for error in exc.errors()
        )
        raise click.ClickException(f"invalid settings: {problems}") from exc
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    return settings


KEEP_ALIVE_S = 30
"""How long an idle client connection is kept open: longer than clients keep idle connections for reuse
(httpx: 5 s), so a client never sends a request on a connection the server is closing at that moment."""


@click.group()
def main() -> None:
    """An x402 facilitator for EIP-3009 payments on an EVM chain (settings from X402_* variables)."""


@main.command()
@click.option("--host", default=None, help="interface to bind (default X402_HOST or 127.0.0.1)")
@click.option("--port", type=int, default=None, help="port (default X402_PORT or 4022)")
@click.option("--migrate/--no-migrate", default=False, help="upgrade the claim store's schema first")
def serve(host: str | None, port: int | None, migrate: bool) -> None:
    """Serve POST /verify, POST /settle, GET /supported, GET /healthz, GET /readyz and GET /metrics."""
    settings = _settings(relayer_key=True)
    settings = settings.model_copy(
        update={"host": host or settings.host, "port": settings.port if port is None else port}
    )
    try:
        logs = configure_logging()
    except LogSettingsError as exc:
        raise click.ClickException(str(exc)) from None
    if migrate:
        asyncio.run(upgrade_schema(settings.database_url, "facilitator"))
    app = create_app(settings=settings)
    uvicorn.run(
        AccessLogMiddleware(app) if logs.access_log else app,
        host=settings.host,
        port=settings.port,
        log_config=None,  # uvicorn's own lines go through the handler configure_logging installed
        log_level="warning",
        access_log=False,
        timeout_keep_alive=KEEP_ALIVE_S,
    )


@main.group()
def db() -> None:
    """The claim store's schema."""


@db.command()
def upgrade() -> None:
    """Create or upgrade the claim store's tables (X402_DATABASE_URL)."""
    settings = _settings()
    asyncio.run(upgrade_schema(settings.database_url, "facilitator"))
    click.echo(f"facilitator schema is up to date in {settings.database_url}")
