"""`x402-merchant callers`: the API keys of a tenant's clients, created (shown once), listed and revoked.

Settings: `X402_DATABASE_URL` (the merchant database, migrated: `x402-merchant db upgrade`) and
`X402_TENANTS_FILE` (the tenants a key may be issued at; only the default tenant without one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

import click
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
from a2a_x402.storage import DEFAULT_DATABASE_URL, create_engine

from ._keys import CallerKeyError, CallerKeys

__all__ = ["MISTAKES", "CallerSettings", "callers_cli"]

_T = TypeVar("_T")

MISTAKES: cli.Mistakes = {
    CallerKeyError: None,
    TenantConfigError: "X402_TENANTS_FILE",
    UnknownTenantError: None,
}
"""What the callers commands answer as their user's mistakes (a bad or taken name, an unknown tenant)."""

_TENANT_OPTION = click.option(
    "--tenant",
    "name",
    default="default",
    show_default=True,
    help="tenant id, as in the billing API's /tenants/<id> (default: the default tenant)",
)


class CallerSettings(BaseSettings):
    """The callers commands' settings, from `X402_*` environment variables."""

    model_config = SettingsConfigDict(env_prefix="X402_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL, description="SQLAlchemy URL of the merchant database"
    )
    tenants_file: str | None = Field(default=None, description="the tenants TOML (the tenants keys are for)")


def _run(name: str, action: Callable[[CallerKeys, str], Awaitable[_T]]) -> _T:
    """Run `action` with the key store and the id of the tenant `name` means (refused when unknown)."""
    settings = cli.load_settings(CallerSettings)
    tenant = tenant_id_of(name)
    known = TenantRegistry.configured_ids(settings.tenants_file)
    if tenant not in known:
        raise UnknownTenantError(tenant, sorted(known))

    async def main() -> _T:
        engine: AsyncEngine = create_engine(settings.database_url)
        try:
            return await action(CallerKeys(engine), tenant)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "-"


@click.group("callers", cls=cli.Group, mistakes=MISTAKES)
def callers_cli() -> None:
    """API keys of a tenant's clients (each a principal whose tasks only it can see)."""


@callers_cli.command()
@click.argument("caller")
@_TENANT_OPTION
def create(caller: str, name: str) -> None:
    """Issue an API key for CALLER and print it: the only time it is shown (only its SHA-256 is kept)."""
    token = _run(name, lambda keys, tenant: keys.create(tenant, caller))
    who = f"caller {caller} of tenant {tenant_name(tenant_id_of(name))}"
    click.echo(f"{who}: send 'Authorization: Bearer <key>'; the key (shown only now):")
    click.echo(token)


@callers_cli.command("list")
@_TENANT_OPTION
def list_(name: str) -> None:
    """The tenant's callers: name, created, last used, revoked (never a key)."""
    listed = _run(name, lambda keys, tenant: keys.list(tenant))
    if not listed:
        tenant = tenant_name(tenant_id_of(name))
        click.echo(f"tenant {tenant} has no callers: `x402-merchant callers create NAME`")
    for key in listed:
        state = f"revoked {_when(key.revoked_at)}" if key.revoked_at is not None else "active"
        click.echo(
            f"{key.name}  created {_when(key.created_at)}  last used {_when(key.last_used_at)}  {state}"
        )


@callers_cli.command()
@click.argument("caller")
@_TENANT_OPTION
def revoke(caller: str, name: str) -> None:
    """Revoke CALLER's key: from now on it is refused (HTTP 401 / UNAUTHENTICATED)."""
    _run(name, lambda keys, tenant: keys.revoke(tenant, caller))
    click.echo(f"revoked caller {caller} of tenant {tenant_name(tenant_id_of(name))}")
