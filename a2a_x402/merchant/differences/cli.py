"""`x402-merchant differences`: the reconciler's differences, listed, acknowledged or booked to a tenant.

Settings: `X402_DATABASE_URL` (the merchant database, migrated). `book` reads the merchant's settings
too (`X402_NETWORK`, `X402_TENANTS_FILE`...): it books to a configured tenant's payTo only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

import click
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402 import cli
from a2a_x402.merchant.tenants import UnknownTenantError, tenant_id_of, tenant_name
from a2a_x402.storage import DEFAULT_DATABASE_URL, create_engine, ensure_schema_current

from ._booking import DifferenceRefusedError, acknowledge_difference, book_difference
from ._store import DifferenceNotOpenError, DifferenceState, DifferenceStore, StoredDifference

__all__ = ["MISTAKES", "differences_cli"]

_T = TypeVar("_T")
MISTAKES: cli.Mistakes = {DifferenceRefusedError: None, DifferenceNotOpenError: None}
"""What the differences commands answer as their user's mistakes (one line, nothing changed)."""
_BY_OPTION = click.option(
    "--by", default="cli", show_default=True, help="who closes it (recorded as resolved_by)"
)
_NOTE_OPTION = click.option("--note", required=True, help="why (recorded, and logged in one line)")


class DifferenceSettings(BaseSettings):
    """Where the differences live (`X402_DATABASE_URL`)."""

    model_config = SettingsConfigDict(env_prefix="X402_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL, description="SQLAlchemy URL of the merchant database"
    )


def _run(database_url: str, action: Callable[[AsyncEngine], Awaitable[_T]]) -> _T:
    async def main() -> _T:
        await ensure_schema_current(database_url, "merchant")
        engine = create_engine(database_url)
        try:
            return await action(engine)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else "-"


def _line(difference: StoredDifference) -> str:
    about = tenant_name(difference.tenant) if difference.tenant is not None else difference.pay_to or "-"
    closed = (
        ""
        if difference.state is DifferenceState.OPEN
        else f" by {difference.resolved_by} at {_when(difference.resolved_at)}: {difference.note}"
    )
    return (
        f"{difference.id}  {difference.state.value}{closed}  {difference.kind}  {about}  "
        f"first {_when(difference.first_seen)}  last {_when(difference.last_seen)}  {difference.detail}"
    )


def _json(difference: StoredDifference) -> dict[str, object]:
    return {
        "id": difference.id,
        "kind": difference.kind,
        "key": difference.key,
        "state": difference.state.value,
        "tenant": None if difference.tenant is None else tenant_name(difference.tenant),
        "pay_to": difference.pay_to,
        "detail": difference.detail,
        "first_seen": _when(difference.first_seen),
        "last_seen": _when(difference.last_seen),
        "note": difference.note,
        "resolved_at": _when(difference.resolved_at) if difference.resolved_at else None,
        "resolved_by": difference.resolved_by,
    }


@click.group("differences", cls=cli.Group, mistakes=MISTAKES)
def differences_cli() -> None:
    """Differences between the records and the chain: open until the chain or an operator resolves them."""


@differences_cli.command("list")
@click.option("--all", "everything", is_flag=True, help="closed ones too (resolved, acknowledged, booked)")
@click.option("--format", "output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def list_(everything: bool, output: str) -> None:
    """The open differences, oldest first: id, state, kind, tenant or payTo, first and last seen, detail."""
    states = tuple(DifferenceState) if everything else (DifferenceState.OPEN,)
    url = cli.load_settings(DifferenceSettings).database_url
    listed = _run(url, lambda engine: DifferenceStore(engine).listed(states=states, limit=10_000))
    if output == "json":
        click.echo(json.dumps([_json(d) for d in listed], indent=2))
        return
    if not listed:
        click.echo("no open differences: the records agree with the chain" if not everything else "none")
    for difference in listed:
        click.echo(_line(difference))


@differences_cli.command()
@click.argument("ident", metavar="ID", type=int)
@_NOTE_OPTION
@_BY_OPTION
def ack(ident: int, note: str, by: str) -> None:
    """Acknowledge open difference ID with a note: it is closed, nothing is booked."""
    url = cli.load_settings(DifferenceSettings).database_url
    _run(url, lambda engine: acknowledge_difference(DifferenceStore(engine), ident, note=note, by=by))
    click.echo(f"difference {ident} acknowledged")


@differences_cli.command()
@click.argument("ident", metavar="ID", type=int)
@click.option("--tenant", "name", default="default", show_default=True, help="the tenant to book it to")
@_NOTE_OPTION
@_BY_OPTION
def book(ident: int, name: str, note: str, by: str) -> None:
    """Book open difference ID (a payment to the tenant's payTo that no offer explains) to the tenant."""
    # Imported here: the merchant's wiring, its settings and the ledger are `book`'s alone, and
    # would cost every other differences command a second of start-up.
    from a2a_x402.merchant.ledger import Ledger
    from a2a_x402.merchant.settings import MerchantSettings
    from a2a_x402.merchant.webhooks import Outbox
    from a2a_x402.merchant.wiring import load_tenants

    settings = cli.load_settings(MerchantSettings)
    tenants = load_tenants(settings)
    tenant = tenants.get(tenant_id_of(name))
    if tenant is None:
        raise UnknownTenantError(tenant_id_of(name), sorted(t.id for t in tenants))

    async def action(engine: AsyncEngine) -> str:
        entry = await book_difference(
            DifferenceStore(engine),
            Ledger(engine, Outbox(engine)),
            ident,
            tenant=tenant.id,
            tenant_pay_to=tenant.pay_to,
            network=settings.network,
            note=note,
            by=by,
        )
        return entry.id

    entry_id = _run(settings.database_url, action)
    click.echo(f"difference {ident} booked to tenant {tenant_name(tenant.id)} as {entry_id}")
