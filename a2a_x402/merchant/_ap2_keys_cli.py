"""`x402-merchant ap2-keys`: rotate a tenant's AP2 checkout keys (§20.1) in the tenants file.

    x402-merchant ap2-keys rotate --tenant acme            # a new key signs; the previous ones stay published
    x402-merchant ap2-keys retire --tenant acme --key acme.pem   # once nothing it signed can still be paid

Settings: `X402_TENANTS_FILE` (the file edited) and, for `retire`, `X402_DATABASE_URL` (the merchant
database, whose stored offers say what a key signed). The merchant reads the tenants file when it starts:
restart it for a change to count. No key material is ever printed, only files and `kid`s.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import click
import sqlalchemy as sa
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from a2a_x402 import cli
from a2a_x402.observability import failure_reason
from a2a_x402.storage import DEFAULT_DATABASE_URL, create_engine

from ._ap2_rotation import Ap2KeyError, KeyChange, Payable, payable_offers, retire_key, rotate_key
from .tenants import TenantConfigError, UnknownTenantError, tenant_id_of, tenant_name

__all__ = ["MISTAKES", "Ap2KeySettings", "ap2_keys_cli"]

MISTAKES: cli.Mistakes = {
    Ap2KeyError: None,
    TenantConfigError: "X402_TENANTS_FILE",
    UnknownTenantError: None,
}
"""What the ap2-keys commands answer as their user's mistakes."""

_TENANT_OPTION = click.option(
    "--tenant",
    "name",
    required=True,
    help="tenant id, as in the tenants file ([tenants.<id>.ap2]; `default` for [default.ap2])",
)


class Ap2KeySettings(BaseSettings):
    """The ap2-keys commands' settings, from `X402_*` environment variables."""

    model_config = SettingsConfigDict(env_prefix="X402_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL, description="SQLAlchemy URL of the merchant database"
    )
    tenants_file: str | None = Field(default=None, description="the tenants TOML whose ap2 tables are edited")


def _tenants_file(settings: Ap2KeySettings) -> Path:
    if not settings.tenants_file:
        raise cli.ConfigError(
            "is not set: the checkout keys are in the tenants file's ap2 tables", variable="X402_TENANTS_FILE"
        )
    return Path(settings.tenants_file)


def _echo_change(change: KeyChange, tenants_file: Path) -> None:
    def listed(keys: tuple[str, ...]) -> str:
        return "[" + ", ".join(f'"{key}"' for key in keys) + "]"

    click.echo(f"{tenants_file} [{change.table}] checkout_keys:")
    click.echo(f"  - {listed(change.before)}")
    click.echo(f"  + {listed(change.after)}")


@click.group("ap2-keys", cls=cli.Group, mistakes=MISTAKES)
def ap2_keys_cli() -> None:
    """AP2 checkout keys of a tenant in the embedded flow (the first signs, all are published)."""


@ap2_keys_cli.command()
@_TENANT_OPTION
def rotate(name: str) -> None:
    """Write a new P-256 key file (mode 0600) beside the signing key and put it first in checkout_keys."""
    tenants_file = _tenants_file(cli.load_settings(Ap2KeySettings))
    change = rotate_key(tenants_file, tenant_id_of(name), now=datetime.now(UTC))
    click.echo(f"tenant {tenant_name(change.tenant)}: new checkout key {change.key_file} (kid {change.kid})")
    _echo_change(change, tenants_file)
    click.echo(
        "restart the merchant: the new key signs new checkouts, the previous ones stay published; "
        "`x402-merchant ap2-keys retire` drops one once nothing it signed can still be paid"
    )


@ap2_keys_cli.command()
@_TENANT_OPTION
@click.option("--key", "key_file", required=True, help="the key file to drop, as the tenants file names it")
def retire(name: str, key_file: str) -> None:
    """Drop a checkout key once no stored offer it signed can still be paid."""
    settings = cli.load_settings(Ap2KeySettings)
    tenants_file, tenant = _tenants_file(settings), tenant_id_of(name)

    def payable_of(kid: str) -> Payable:
        return asyncio.run(_payable(settings.database_url, tenant, kid))

    change = retire_key(tenants_file, tenant, key_file, payable_of)
    click.echo(
        f"tenant {tenant_name(change.tenant)}: retired checkout key {change.key_file} (kid {change.kid})"
    )
    _echo_change(change, tenants_file)
    click.echo(
        "restart the merchant to stop publishing it; the key file is left in place (delete or archive it)"
    )


async def _payable(database_url: str, tenant: str, kid: str) -> Payable:
    engine = create_engine(database_url)
    try:
        return await payable_offers(engine, tenant, kid, now=int(time.time()))
    except sa.exc.SQLAlchemyError as exc:
        raise cli.ConfigError(
            f"cannot read the stored offers ({failure_reason(exc)}); is it migrated? "
            "(x402-merchant db upgrade)",
            variable="X402_DATABASE_URL",
        ) from None
    finally:
        await engine.dispose()
