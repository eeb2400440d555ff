"""``x402-pay``: send a request to an x402-priced A2A agent and pay for it.

    x402-pay --card-url http://127.0.0.1:8000 --key-file payer.key --max-amount 1000000 "some text"

It prints each task state as it changes, the payment it signs, the settlement transaction, and the
artifacts (text parts as text, data parts as JSON). A refusal or failure goes to stderr as
``Error: <code>: <message>`` with exit status 1; a mistake (an option, a key, a --card-url that is no http(s)
URL) is one line, exit status 2, before any request; a merchant that could not be reached before anything was
signed (``merchant_unreachable``) exits with status 69 (``EX_UNAVAILABLE``): trying again later is safe. A
payer whose balance is below the price stops at the merchant's first refusal (``insufficient_funds``):
signing again cannot cure it.

The merchant's Agent Card signature is checked under ``--card-policy``: ``warn`` (default) reports an
unsigned or failing card and pays on, ``require`` refuses such a card before anything is signed, ``off``
checks nothing. Keys come from the card's ``jku`` (its JWK Set on the card's own origin), over HTTPS only
unless ``--allow-insecure-jku`` (development) allows ``http://`` on localhost; a card whose keys only that
flag would let through says so.

The key comes from ``--key``, ``--key-file``, ``X402_PAYER_KEY``, or else the first of ``X402_PAYER_KEYS``
(what ``x402-devchain`` writes to its env file), in that order. Prefer the file or the environment: a key on
the command line is visible to other users of the machine.

Terms paid by Permit2 (``exact`` by Permit2, ``upto``) need ``--rpc-url`` (``X402_PAYER_RPC_URL``): the payer
reads its allowance to Permit2 there first. ``upto`` (metered) terms are signed only under
``--upto-max-per-task``, and within ``--upto-max-per-day`` when given: the day's sum is this process's alone,
unless ``--upto-days-file`` (``X402_PAYER_UPTO_DAYS_FILE``) names a SQLite file to count it in, which every
run naming it shares (one after another, or at once) and which outlives the process.
With ``--ap2-mandates DIR --ap2-agent-key FILE`` (``_ap2_cli``) a tenant the card declares in ``params.ap2``
is paid with the user's open AP2 mandates, closed over each payment, within their budget (counted across
runs in ``--ap2-usage-file``); nothing of a mandate or the key is printed.
``x402-pay approve-permit2 --asset TOKEN --rpc-url URL`` sends the one-time approval of Permit2 a token
without EIP-2612 needs, and prints its transaction: the one transaction the payer ever sends (and pays gas
for) itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from a2a.types import Artifact, TaskState
from google.protobuf.json_format import MessageToDict

from a2a_x402 import cli
from a2a_x402.agentcard import CardStatus, JkuNotAllowedError, SignaturePolicy, VerificationResult, check_jku
from a2a_x402.observability import redact_values

from ._ap2_cli import ap2_options, read_open_mandates
from ._ap2_issue_cli import AP2, ISSUE_OPEN, issue_open_main
from ._approve_cli import APPROVE, approve_main
from ._card import Binding, card_document_url
from ._cli_options import checked_rpc_url, setup
from ._errors import CardError, MerchantUnreachableError, PayerError, UntrustedCardError
from ._policy import PaymentPolicy
from ._stages import PaidResult, PaymentStage, StageKind

if TYPE_CHECKING:
    from ._ap2_sdk import OpenMandates
    from ._payer import Payer

__all__ = ["main"]


class _Unavailable(click.ClickException):
    """No merchant answered and nothing was signed: another try later is safe (sysexits' EX_UNAVAILABLE)."""

    exit_code = os.EX_UNAVAILABLE


_HTTP_TIMEOUT_S = 60.0


class _Printer:
    """Prints a run's stages: a state line when the state or its message changes, and payment events."""

    def __init__(self) -> None:
        self._last: tuple[int, str | None] | None = None
        self._transaction: str | None = None

    def __call__(self, stage: PaymentStage) -> None:
        if stage.kind is StageKind.PAYMENT_SIGNED and stage.requirements is not None:
            terms = stage.requirements
            amount = f"up to {terms.amount}" if terms.scheme == "upto" else str(terms.amount)
            click.echo(f"signed: {amount} atomic units of {terms.asset} on {terms.network} to {terms.pay_to}")
        elif stage.kind is StageKind.RESUBMITTED:
            click.echo(f"resubmitting the same signed payment: {stage.detail}")
        elif stage.kind is not StageKind.COMPLETED and (stage.state, stage.message) != self._last:
            self._last = (stage.state, stage.message)
            suffix = f" - {stage.message}" if stage.message else ""
            click.echo(f"state: {TaskState.Name(stage.state)}{suffix}")
        if stage.transaction is not None and stage.transaction != self._transaction:
            self._transaction = stage.transaction
            click.echo(f"transaction: {stage.transaction}")


def _print_result(result: PaidResult) -> None:
    if result.paid is not None:
        upto = f" (of at most {result.paid.amount})" if result.paid.scheme == "upto" else ""
        click.echo(f"paid: {result.settled} atomic units{upto} to {result.paid.pay_to} from {result.payer}")
        for item in result.usage.items if result.usage is not None else ():
            click.echo(f"used: {item.quantity} {item.name} at {item.unit_price} = {item.amount} atomic units")
    else:
        click.echo("paid: nothing (the agent asked for no payment)")
    if result.ap2_mandates is not None:
        receipts = "verified" if result.ap2_receipts is not None else "none sent"
        click.echo(f"ap2: paid under the user's open mandates (merchant's AP2 receipts: {receipts})")
    for artifact in result.artifacts:
        _print_artifact(artifact)


def _print_artifact(artifact: Artifact) -> None:
    click.echo(f"artifact: {artifact.name or artifact.artifact_id}")
    for part in artifact.parts:
        match part.WhichOneof("content"):
            case "text":
                click.echo(part.text)
            case "data":
                click.echo(json.dumps(_integral(MessageToDict(part.data)), indent=2, sort_keys=True))
            case "url":
                click.echo(part.url)
            case "raw":
                click.echo(f"<{len(part.raw)} bytes of {part.media_type or 'binary data'}>")
            case _:
                click.echo("<empty part>")


def _integral(value: object) -> object:
    """``value`` with the integral numbers a protobuf ``Value`` turned into floats shown as integers again."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _card_line(verification: VerificationResult, *, allow_insecure_jku: bool) -> str:
    """What the card's signature check found, for the ``card:`` line."""
    if verification.status is CardStatus.SKIPPED:
        return "card: signature not checked (--card-policy off)"
    if verification.status is CardStatus.VERIFIED:
        return f"card: signature verified (kid {verification.kid})"
    if verification.status is CardStatus.UNSIGNED:
        return "card: unsigned"
    return f"card: signature FAILED: {verification.reason}{_jku_hint(verification, allow_insecure_jku)}"


def _jku_hint(verification: VerificationResult, allow_insecure_jku: bool) -> str:
    """What to do when a signature failed for a plain-http jku that --allow-insecure-jku would allow."""
    if allow_insecure_jku:
        return ""
    for check in verification.checks:
        if check.code != JkuNotAllowedError.code or check.jku is None:
            continue
        try:
            check_jku(check.jku, allow_insecure_localhost=True)
        except JkuNotAllowedError:
            continue  # not HTTPS and not localhost either: the flag would not help
        return "; to fetch its keys over plain http from localhost (development), pass --allow-insecure-jku"
    return ""


def _checked_card_url(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """--card-url as given, once it is an absolute http(s) URL (refused before any request otherwise)."""
    try:
        card_document_url(value)
    except CardError as exc:
        raise click.BadParameter(f"{exc} (e.g. http://127.0.0.1:8000)") from None
    return value


async def _pay(
    card_url: str,
    key: str,
    text: str,
    *,
    stream: bool,
    binding: Binding,
    tenant: str,
    policy: PaymentPolicy,
    rpc_url: str | None,
    card_policy: SignaturePolicy,
    allow_insecure_jku: bool,
    mandates: OpenMandates | None,
) -> PaidResult:
    # Imported here: the HTTP client, the A2A client and the signing libraries are paying's alone, and
    # would cost `--help`, `--version` and every refused option a second of start-up.
    import httpx

    from a2a_x402.agentcard import CardVerifier, JwksCache

    from ._payer import Payer

    async with httpx.AsyncClient(timeout=_HTTP_TIMEOUT_S) as http:
        verifier = CardVerifier(
            jwks=JwksCache(http, allow_insecure_localhost=allow_insecure_jku), policy=card_policy
        )
        async with Payer.connect(
            card_url,
            key,
            binding=binding,
            tenant=tenant,
            policy=policy,
            card_verifier=verifier,
            http=http,
            rpc_urls=rpc_url,
            mandates=mandates,
            # The tenant's checkout keys come from its jwksUrl under the card's own rules.
            ap2_jwks=JwksCache(http, allow_insecure_localhost=allow_insecure_jku),
        ) as payer:
            click.echo(f"card: {payer.card.card.name} at {payer.card.url}")
            click.echo(_card_line(payer.card.verification, allow_insecure_jku=allow_insecure_jku))
            return await _run(payer, text, stream=stream, binding=binding, tenant=tenant)


async def _run(payer: Payer, text: str, *, stream: bool, binding: Binding, tenant: str) -> PaidResult:
    printer = _Printer()
    where = f"tenant {tenant!r}" if tenant else "default tenant"
    click.echo(f"payer: {payer.address} ({binding.value}, {where})")
    if not stream:
        return await payer.pay(text, on_stage=printer)
    async for stage in payer.pay_streaming(text):
        printer(stage)
        if stage.result is not None:
            return stage.result
    raise RuntimeError("a payment run ends with a result or an error")


class _PayCommand(cli.Command):
    """``x402-pay``: pays; its first arguments ``approve-permit2`` or ``ap2 issue-open`` run that subcommand
    instead."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        given = list(sys.argv[1:] if args is None else args)
        prog = prog_name or os.path.basename(sys.argv[0]) or "x402-pay"
        if given[:1] == [APPROVE]:
            return approve_main.main(given[1:], f"{prog} {APPROVE}", complete_var, standalone_mode, **extra)
        if given[:2] == [AP2, ISSUE_OPEN]:
            name = f"{prog} {AP2} {ISSUE_OPEN}"
            return issue_open_main.main(given[2:], name, complete_var, standalone_mode, **extra)
        return super().main(given, prog, complete_var, standalone_mode, **extra)


@click.command(cls=_PayCommand)
@click.version_option(package_name="a2a-x402-merchant", prog_name="x402-pay")
@click.option(
    "--card-url", required=True, callback=_checked_card_url, help="The agent's card URL, or its origin."
)
@click.option("--tenant", default="", help="The merchant tenant to pay (default: the default tenant).")
@click.option(
    "--binding",
    type=click.Choice([b.value for b in Binding]),
    default=Binding.JSONRPC.value,
    show_default=True,
    help="The A2A protocol binding.",
)
@click.option(
    "--key",
    envvar="X402_PAYER_KEY",
    help=(
        "The payer's private key (hex); env X402_PAYER_KEY. Without it or --key-file: the first key of "
        "X402_PAYER_KEYS (what x402-devchain --export sets)."
    ),
)
@click.option(
    "--key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file holding the payer's private key (hex).",
)
@click.option(
    "--max-amount",
    type=click.IntRange(min=0),
    default=None,
    help="Refuse payments over this many atomic units (default: no cap).",
)
@click.option("--network", "networks", multiple=True, help="Only pay on this CAIP-2 network (repeatable).")
@click.option(
    "--upto-max-per-task",
    envvar="X402_PAYER_UPTO_MAX_PER_TASK",
    type=click.IntRange(min=0),
    default=None,
    help="Sign metered (upto) terms whose maximum is at most this many atomic units (default: refuse upto).",
)
@click.option(
    "--upto-max-per-day",
    envvar="X402_PAYER_UPTO_MAX_PER_DAY",
    type=click.IntRange(min=0),
    default=None,
    help=(
        "Refuse upto terms once their maxima would pass this many atomic units this UTC day (counted by this "
        "process alone, unless --upto-days-file is given)."
    ),
)
@click.option(
    "--upto-days-file",
    envvar="X402_PAYER_UPTO_DAYS_FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=(
        "A SQLite file (made if missing) counting the upto maxima of each UTC day for --upto-max-per-day: "
        "shared by every run naming it and kept across runs."
    ),
)
@click.option(
    "--rpc-url",
    envvar="X402_PAYER_RPC_URL",
    callback=checked_rpc_url,
    help="A JSON-RPC node of the chain, to read the Permit2 allowance (needed to pay by Permit2 only).",
)
@click.option(
    "--card-policy",
    type=click.Choice([p.value for p in SignaturePolicy]),
    default=SignaturePolicy.WARN.value,
    show_default=True,
    help="The card's signature: require (refuse an unsigned or failing card), warn (report it), off.",
)
@click.option(
    "--allow-insecure-jku",
    is_flag=True,
    help=(
        "Development: fetch the card's JWK Set (and a tenant's AP2 checkout keys) over plain http from "
        "localhost/127.0.0.1."
    ),
)
@ap2_options
@click.option("--stream", is_flag=True, help="Use SendStreamingMessage and print stages as they arrive.")
@click.option("-v", "--verbose", is_flag=True, help="Log the payer's progress to stderr.")
@click.argument("text")
def main(
    card_url: str,
    tenant: str,
    binding: str,
    key: str | None,
    key_file: Path | None,
    max_amount: int | None,
    networks: tuple[str, ...],
    upto_max_per_task: int | None,
    upto_max_per_day: int | None,
    upto_days_file: Path | None,
    rpc_url: str | None,
    card_policy: str,
    allow_insecure_jku: bool,
    ap2_mandates: Path | None,
    ap2_agent_key: Path | None,
    ap2_usage_file: Path | None,
    ap2_fallback: bool,
    stream: bool,
    verbose: bool,
    text: str,
) -> None:
    """Send TEXT to the agent at --card-url, pay what it asks (within the policy), print the result.

    x402-pay approve-permit2 --help: approve Permit2 once for a token without EIP-2612.
    x402-pay ap2 issue-open --help: open AP2 mandates for tests (a throwaway "user" key).
    """
    private_key = setup(key, key_file, verbose=verbose)
    if rpc_url is not None:
        redact_values([rpc_url])  # an RPC URL may carry its provider's API key
    mandates = read_open_mandates(ap2_mandates, ap2_agent_key, ap2_usage_file)
    try:
        policy = PaymentPolicy(
            max_amount_atomic=max_amount,
            networks=frozenset(networks) if networks else None,
            upto_max_per_task_atomic=upto_max_per_task,
            upto_max_per_day_atomic=upto_max_per_day,
            upto_days_file=upto_days_file,
            ap2_standalone_fallback=ap2_fallback,
        )
    except ValueError as exc:  # an --upto-days-file that cannot be opened or made
        raise cli.ConfigError(str(exc)) from exc
    try:
        result = asyncio.run(
            _pay(
                card_url,
                private_key,
                text,
                stream=stream,
                binding=Binding(binding),
                tenant=tenant,
                policy=policy,
                rpc_url=rpc_url,
                card_policy=SignaturePolicy(card_policy),
                allow_insecure_jku=allow_insecure_jku,
                mandates=mandates,
            )
        )
    except PayerError as exc:
        where = f" (task {exc.task_id})" if exc.task_id else ""
        signed = "a payment was signed" if exc.signed else "nothing was signed"
        hint = _jku_hint(exc.verification, allow_insecure_jku) if isinstance(exc, UntrustedCardError) else ""
        message = f"{exc.code}: {exc}{where}; {signed}{hint}"
        if isinstance(exc, MerchantUnreachableError) and not exc.signed:
            raise _Unavailable(message) from exc
        raise click.ClickException(message) from exc
    except ValueError as exc:  # a key, URL or option value that cannot be used
        raise cli.ConfigError(str(exc)) from exc
    _print_result(result)


if __name__ == "__main__":
    main()
