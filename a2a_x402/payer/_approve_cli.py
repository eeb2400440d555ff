"""``x402-pay approve-permit2``: the one transaction a payer sends itself, the approval of Permit2 that a
token without EIP-2612 needs before it can be paid by Permit2; it prints the transaction."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import click
from eth_utils.address import to_checksum_address

from a2a_x402 import cli
from a2a_x402.observability import redact_values

from ._cli_options import checked_rpc_url, setup
from ._errors import PayerError

__all__ = ["APPROVE", "approve_main"]

APPROVE = "approve-permit2"
"""The subcommand's name, the first argument of ``x402-pay``."""
_HTTP_TIMEOUT_S = 60.0


def _checked_asset(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """--asset checksummed, once it is a token address (a mixed-case one with a wrong checksum is a typo)."""
    if not re.fullmatch(r"0x[0-9a-fA-F]{40}", value) or (
        value[2:] not in (value[2:].lower(), value[2:].upper()) and to_checksum_address(value) != value
    ):
        raise click.BadParameter(
            "the asset must be a token address (0x and 40 hex digits, EIP-55 if mixed-case)"
        )
    return str(to_checksum_address(value))


async def _approve(rpc_url: str, key: str, asset: str) -> None:
    # Imported here, as in `_pay`: the signing libraries are this subcommand's alone.
    from ._approve import approve_permit2

    approval = await approve_permit2(rpc_url, key, asset, timeout_s=_HTTP_TIMEOUT_S)
    where = f"{asset} of {approval.owner} on {approval.network}"
    if approval.transaction is None:
        click.echo(f"approved already: Permit2 may move all of {where}; nothing sent")
    else:
        click.echo(f"approved: Permit2 may move all of {where}")
        click.echo(f"transaction: {approval.transaction}")


@click.command(cls=cli.Command, name=APPROVE)
@click.option("--asset", required=True, callback=_checked_asset, help="The token to approve Permit2 on.")
@click.option(
    "--rpc-url",
    envvar="X402_PAYER_RPC_URL",
    required=True,
    callback=checked_rpc_url,
    help="A JSON-RPC node of the token's chain; env X402_PAYER_RPC_URL.",
)
@click.option("--key", envvar="X402_PAYER_KEY", help="The payer's private key (hex); env X402_PAYER_KEY.")
@click.option(
    "--key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file holding the payer's private key (hex).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log progress to stderr.")
def approve_main(asset: str, rpc_url: str, key: str | None, key_file: Path | None, verbose: bool) -> None:
    """Approve Permit2, once, to move all of --asset from the payer's account; print the transaction.

    Paying by Permit2 in a token without EIP-2612 needs it; a token with EIP-2612 is approved within each
    payment instead, for free. The payer's account pays this transaction's gas. Nothing is sent when Permit2
    may already move all of it.
    """
    private_key = setup(key, key_file, verbose=verbose)
    redact_values([rpc_url])  # an RPC URL may carry its provider's API key
    try:
        asyncio.run(_approve(rpc_url, private_key, asset))
    except PayerError as exc:
        raise click.ClickException(f"{exc.code}: {exc}") from exc
