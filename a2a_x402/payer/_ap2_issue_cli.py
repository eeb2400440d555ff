"""``x402-pay ap2 issue-open``: open AP2 mandates for trying the embedded flow out, FOR TESTS ONLY.

    x402-pay ap2 issue-open --card-url http://127.0.0.1:8000 --tenant acme --budget 20 --max 1.00 --out DIR

A real user's open mandates come from a Trusted Surface outside this project (a wallet, the agent
provider), after the user consented. This helper stands in for it: it makes a throwaway "user" key, signs
open mandates for the tenant's AP2 merchant (read from the card's ``params.ap2``) allowing at most
``--max`` a payment and ``--budget`` in all, and writes what ``x402-pay --ap2-mandates DIR --ap2-agent-key
DIR/agent.jwk`` reads, plus ``DIR/issuer.jwks.json``: the public key a merchant must be told to trust
(its tenant's ``issuers``) before it takes them. The "user" key's private part is never written. The agent
key is written readable by its owner alone, and nothing of it or of the mandates is printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING

import click

from a2a_x402 import cli

from ._ap2_cli import CHECKOUT_FILE, PAYMENT_FILE
from ._card import card_document_url
from ._errors import CardError, PayerError

if TYPE_CHECKING:
    from a2a_x402.extension import Ap2Merchant

__all__ = ["AP2", "ISSUE_OPEN", "issue_open_main"]

AP2 = "ap2"
ISSUE_OPEN = "issue-open"
"""The subcommand's words: ``x402-pay ap2 issue-open``."""
AGENT_KEY_FILE = "agent.jwk"
ISSUER_FILE = "issuer.jwks.json"
_CURRENCY = "USD"
_TIMEOUT_S = 30.0


def _cents(_ctx: click.Context, param: click.Parameter, value: str) -> int:
    """A USD amount (``20``, ``1.00``) in cents."""
    try:
        amount = Decimal(value)
    except InvalidOperation:
        amount = Decimal("NaN")
    if not amount.is_finite() or amount < 0 or (amount * 100) % 1:
        raise click.BadParameter(f"{param.name} is a USD amount in whole cents (e.g. 1.00)")
    return int(amount * 100)


async def _merchant(card_url: str, tenant: str, allow_insecure_jku: bool) -> tuple[Ap2Merchant, str]:
    import httpx

    from a2a_x402.agentcard import CardVerifier, JwksCache

    from ._ap2_offer import tenant_declaration
    from ._card import resolve_card

    async with httpx.AsyncClient(timeout=_TIMEOUT_S) as http:
        jwks = JwksCache(http, allow_insecure_localhost=allow_insecure_jku)
        card = await resolve_card(http, card_url, verifier=CardVerifier(jwks=jwks), timeout_s=_TIMEOUT_S)
    declaration = tenant_declaration(card, tenant, allow_insecure_localhost=allow_insecure_jku)
    if declaration is None:
        raise CardError(f"the card declares no AP2 (params.ap2) entry for tenant {tenant!r}")
    return declaration.merchant, card.url


@click.command(cls=cli.Command, name=f"{AP2} {ISSUE_OPEN}")
@click.option("--card-url", required=True, help="The merchant's card URL, or its origin.")
@click.option("--tenant", default="", help="The tenant whose AP2 merchant the mandates name.")
@click.option("--budget", required=True, callback=_cents, help="The most all payments may add up to (USD).")
@click.option(
    "--max", "max_amount", required=True, callback=_cents, help="The most one payment may be (USD)."
)
@click.option("--days", type=click.IntRange(min=1, max=365), default=7, show_default=True, help="Validity.")
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A new folder to write the mandates, the agent key and the issuer key set into.",
)
@click.option("--allow-insecure-jku", is_flag=True, help="Development: read a loopback card over http.")
def issue_open_main(
    card_url: str, tenant: str, budget: int, max_amount: int, days: int, out: Path, allow_insecure_jku: bool
) -> None:
    """FOR TESTS ONLY: issue open AP2 mandates with a throwaway "user" key, for the tenant's merchant."""
    try:
        card_document_url(card_url)
    except CardError as exc:
        raise click.BadParameter(str(exc), param_hint="--card-url") from None
    if out.exists():
        raise click.UsageError(f"{out} exists: give a new folder, so that no key is overwritten")
    try:
        merchant, url = asyncio.run(_merchant(card_url, tenant, allow_insecure_jku))
        from ._ap2_sdk import issue_test_mandates

        issued = issue_test_mandates(
            merchant,
            budget=budget,
            max_amount=max_amount,
            currency=_CURRENCY,
            lifetime_s=days * 86400,
            now=int(time.time()),
        )
    except PayerError as exc:
        raise click.ClickException(f"{exc.code}: {exc}") from exc
    out.mkdir(parents=True)
    (out / CHECKOUT_FILE).write_text(issued.mandates.checkout + "\n")
    (out / PAYMENT_FILE).write_text(issued.mandates.payment + "\n")
    key = os.open(out / AGENT_KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(key, "w") as file:
        json.dump(dict(issued.mandates.agent_key), file)
    (out / ISSUER_FILE).write_text(json.dumps(issued.issuer_jwks, indent=2) + "\n")
    click.echo("issued TEST open mandates: for trying things out only, no person consented to them")
    click.echo(f"merchant: {merchant.id} ({merchant.name}) of {url}, tenant {tenant!r}")
    click.echo(f"allowed: at most {max_amount} cents a payment, {budget} cents in all, for {days} days")
    click.echo(f"wrote: {out}/{CHECKOUT_FILE}, {out}/{PAYMENT_FILE}, {out}/{AGENT_KEY_FILE} (owner only)")
    click.echo(f"merchant: trust {out}/{ISSUER_FILE} as an issuer of the tenant (its ap2 issuers)")
