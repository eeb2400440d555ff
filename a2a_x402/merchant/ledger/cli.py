"""`ledger` commands (mounted under `x402-merchant`): a tenant's balances and statements, and an audit.

The database comes from `X402_DATABASE_URL` (SQLite `./x402.db` by default) and must be migrated to the
`merchant` head first; these commands only read. A tenant is named as in the billing API (`default` for the
default tenant) and must be configured (`X402_TENANTS_FILE`, or only `default` without one) or have
bookings in the ledger: any other name is refused (`UnknownTenantError`), not answered with an empty table.
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
from a2a_x402.storage import (
    DEFAULT_DATABASE_URL,
    DatabaseUnavailableError,
    DatabaseUrlError,
    SchemaOutdatedError,
    create_engine,
    ensure_schema_current,
)

from ._errors import LedgerError
from ._invariants import check_invariants
from ._queries import LedgerReader
from ._records import Balance, StatementLine
from ._statement import balances_json, statement_csv, statement_json

__all__ = ["MISTAKES", "LedgerSettings", "ledger_cli"]

_T = TypeVar("_T")
MISTAKES: cli.Mistakes = {
    DatabaseUrlError: "X402_DATABASE_URL",
    DatabaseUnavailableError: "X402_DATABASE_URL",
    SchemaOutdatedError: "X402_DATABASE_URL",
    TenantConfigError: "X402_TENANTS_FILE",
    UnknownTenantError: None,
}
"""What the ledger commands answer as their user's mistakes (an unknown tenant, the database)."""
_TENANT_HELP = "tenant id, as in the billing API's /tenants/<id> (default: the default tenant)"


class LedgerSettings(BaseSettings):
    """Where the ledger lives (`X402_DATABASE_URL`), its tenants, and the token it writes for people."""

    model_config = SettingsConfigDict(env_prefix="X402_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL, description="SQLAlchemy URL of the merchant database"
    )
    tenants_file: str | None = Field(
        default=None, description="the tenants TOML naming the configured tenants"
    )
    asset: str | None = Field(default=None, description="the token the merchant is paid in (its address)")
    asset_name: str = Field(default="USDC", description="that token's name, shown beside its amounts")
    asset_decimals: int = Field(default=6, ge=0, le=36, description="that token's decimals")

    def display(self, asset: str, atomic: int) -> str:
        """`atomic` units of `asset` as people read them (`0.001500 USDC`), or `—` for a token whose decimals
        the settings do not give."""
        if self.asset is None or asset.lower() != self.asset.lower():
            return "—"
        sign = "-" if atomic < 0 else ""
        whole, fraction = divmod(abs(atomic), 10**self.asset_decimals)
        amount = f"{whole:,}.{fraction:0{self.asset_decimals}d}" if self.asset_decimals else f"{whole:,}"
        return f"{sign}{amount} {self.asset_name}"


class _UtcTime(click.ParamType[datetime, str | datetime]):
    """An ISO 8601 time with a zone (`2026-11-30T00:00:00Z`); a naive time would be ambiguous."""

    name = "iso8601"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 time", param, ctx)
        if parsed.tzinfo is None:
            self.fail(f"{value!r} has no time zone (add Z or +00:00)", param, ctx)
        return parsed


def _run(action: Callable[[AsyncEngine], Awaitable[_T]]) -> _T:
    async def main() -> _T:
        settings = cli.load_settings(LedgerSettings)
        await ensure_schema_current(settings.database_url, "merchant")
        engine = create_engine(settings.database_url)
        try:
            return await action(engine)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except LedgerError as exc:
        raise click.ClickException(f"{exc.code}: {exc}") from exc


async def _tenant(engine: AsyncEngine, name: str) -> str:
    """The id of the tenant `name` means; raises UnknownTenantError for one neither configured nor booked."""
    tenant_id = tenant_id_of(name)
    configured = await asyncio.to_thread(
        TenantRegistry.configured_ids, cli.load_settings(LedgerSettings).tenants_file
    )
    if tenant_id in configured:
        return tenant_id
    booked = await LedgerReader(engine).tenants()
    if tenant_id not in booked:
        raise UnknownTenantError(tenant_id, sorted(configured | booked))
    return tenant_id


@click.group("ledger", cls=cli.Group, mistakes=MISTAKES)
def ledger_cli() -> None:
    """The double-entry ledger: balances, statements and an invariant audit (X402_DATABASE_URL)."""


@ledger_cli.command()
@click.option("--tenant", "name", default="default", show_default=True, help=_TENANT_HELP)
@click.option("--asset", default=None, help="only this token contract address")
@click.option("--format", "output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def balance(name: str, asset: str | None, output: str) -> None:
    """The tenant's revenue per network and asset: as people read it (X402_ASSET's, with X402_ASSET_NAME and
    X402_ASSET_DECIMALS) and in atomic units."""

    async def action(engine: AsyncEngine) -> tuple[str, list[Balance]]:
        tenant = await _tenant(engine, name)
        return tenant, await LedgerReader(engine).balance(tenant, asset)

    tenant, balances = _run(action)
    if output == "json":
        click.echo(balances_json(tenant_name(tenant), balances))
        return
    settings = cli.load_settings(LedgerSettings)
    click.echo(f"{'network':<16} {'asset':<42} {'balance':>24} {'atomic units':>32}")
    for item in balances:
        shown = settings.display(item.asset, item.balance)
        click.echo(f"{item.network:<16} {item.asset:<42} {shown:>24} {item.balance:>32}")


@ledger_cli.command()
@click.option("--tenant", "name", default="default", show_default=True, help=_TENANT_HELP)
@click.option("--since", type=_UtcTime(), default=None, help="booked at or after (ISO 8601 with zone)")
@click.option("--until", type=_UtcTime(), default=None, help="booked before (ISO 8601 with zone)")
@click.option("--format", "output", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
def statement(name: str, since: datetime | None, until: datetime | None, output: str) -> None:
    """Every movement of the tenant's revenue in [since, until), as CSV or JSON on stdout."""

    async def action(engine: AsyncEngine) -> tuple[str, list[StatementLine]]:
        tenant = await _tenant(engine, name)
        return tenant, await LedgerReader(engine).statement(tenant, since, until)

    tenant, lines = _run(action)
    if output == "json":
        click.echo(statement_json(tenant_name(tenant), lines, since=since, until=until))
    else:
        click.echo(statement_csv(lines), nl=False)


@ledger_cli.command()
def check() -> None:
    """Audit the whole ledger: every entry balances and every account total equals its lines."""
    _run(check_invariants)
    click.echo("ledger invariants hold")
