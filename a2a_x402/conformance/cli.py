"""``x402-a2a-conformance``: check a merchant against the A2A x402 extension specification.

Exit status: 0 when every MUST check passed, 1 when one failed, 2 for a usage error or a setup the kit
refuses before paying anything (a chain or merchant that does not answer, no usable payer key), in one line.
The payer's key is read as ``x402-pay`` reads it, from ``--payer-key-file``, the ``X402_PAYER_KEY``
environment variable or else the first of ``X402_PAYER_KEYS`` (what ``x402-devchain --export`` sets), never
from the command line (where it would be in the shell's history and the process list).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import NoReturn

from eth_account import Account

from ._ap2_sdk import Ap2SdkError, import_key, sdk_problem
from ._render import render_console, render_json, render_junit, render_markdown
from ._runner import KitSettings, run_conformance
from ._setup import SetupError, check_setup

__all__ = ["main"]

_KEY_VARIABLE = "X402_PAYER_KEY"
_KEYS_VARIABLE = "X402_PAYER_KEYS"
_PROG = "x402-a2a-conformance"


def _version() -> str:
    try:
        return version("a2a-x402-merchant")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Check an A2A merchant against the x402 payment extension (spec/v0.3.md), black-box.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s, version {_version()}")
    parser.add_argument("merchant", help="the merchant's Agent Card URL, or its base URL")
    parser.add_argument("--rpc-url", required=True, help="JSON-RPC URL of the chain the merchant settles on")
    parser.add_argument(
        "--payer-key-file",
        type=Path,
        help=f"file holding the payer's key (else ${_KEY_VARIABLE}, else the first of ${_KEYS_VARIABLE})",
    )
    parser.add_argument(
        "--max-amount", type=int, default=1_000_000, help="most the kit signs per payment (atomic units)"
    )
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds allowed for each answer")
    parser.add_argument("--max-bytes", type=int, default=2 * 1024 * 1024, help="largest answer accepted")
    parser.add_argument("--concurrency", type=int, default=4, help="scenarios run at the same time")
    parser.add_argument(
        "--caller-tokens-file",
        type=Path,
        help="file holding two bearer tokens (one a line) of two callers of the default tenant",
    )
    parser.add_argument(
        "--approve-permit2",
        action="store_true",
        help="let the kit approve Permit2 for the payer where a Permit2 payment needs it (costs gas)",
    )
    parser.add_argument(
        "--failing-request",
        default="",
        help="a request for the metered skill that makes its work fail (for metered.failed-work)",
    )
    parser.add_argument(
        "--ap2-issuer-key",
        type=Path,
        help="file holding the private JWK (EC P-256, with kid) of an issuer the merchant trusts for the AP2 "
        "tenants under test: the checks presenting mandates run only with it",
    )
    parser.add_argument(
        "--allow-insecure-jwks",
        action="store_true",
        help="development: take a params.ap2 jwksUrl of plain http on localhost/127.0.0.1 as https",
    )
    parser.add_argument(
        "--only", action="append", default=[], help="run only this check id or prefix (repeatable)"
    )
    parser.add_argument("--json", type=Path, help="write the JSON report here")
    parser.add_argument("--markdown", type=Path, help="write the Markdown report here")
    parser.add_argument("--junit", type=Path, help="write the JUnit XML report here")
    parser.add_argument("--verbose", action="store_true", help="list every result, not only the failures")
    return parser


def _refuse(message: str) -> NoReturn:
    """One line on stderr and exit 2: the kit's own setup is wrong, nothing was paid."""
    sys.stderr.write(f"{_PROG}: error: {message}\n")
    raise SystemExit(2)


def _key(path: Path | None) -> str:
    if path is not None:
        try:
            key = path.read_text(encoding="utf-8").strip()
        except OSError as error:
            _refuse(f"cannot read the payer key file {path}: {(error.strerror or 'unreadable').lower()}")
    else:
        key = os.environ.get(_KEY_VARIABLE, "").strip()
        key = key or os.environ.get(_KEYS_VARIABLE, "").split(",")[0].strip()
    if not key:
        _refuse(f"no payer key: give --payer-key-file or set {_KEY_VARIABLE} (or {_KEYS_VARIABLE})")
    try:
        Account.from_key(key)
    except (ValueError, TypeError):
        _refuse("the payer key is not a valid secp256k1 private key (32 bytes of hex)")
    return key


def _tokens(parser: argparse.ArgumentParser, path: Path | None) -> tuple[str, ...]:
    if path is None:
        return ()
    try:
        tokens = tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except OSError as error:
        parser.error(f"cannot read the caller tokens file: {error.strerror}")
    if len(tokens) != 2:
        parser.error(f"the caller tokens file must hold two tokens, one a line; it holds {len(tokens)}")
    return tokens


def _issuer_key(path: Path | None) -> dict[str, str] | None:
    """The private JWK of ``--ap2-issuer-key``; nothing of the file is ever shown."""
    if path is None:
        return None
    try:
        members = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        _refuse(f"cannot read the AP2 issuer key file {path}: {(error.strerror or 'unreadable').lower()}")
    except ValueError:
        _refuse(f"the AP2 issuer key file {path} is not JSON (a private JWK)")
    if (
        not isinstance(members, dict)
        or not all(isinstance(value, str) for value in members.values())
        or (members.get("kty"), members.get("crv")) != ("EC", "P-256")
        or not all(members.get(name) for name in ("x", "y", "d", "kid"))
    ):
        _refuse(f"the AP2 issuer key file {path} is not a private EC P-256 JWK with a kid")
    if not sdk_problem():  # without the SDK the mandate checks are skipped, saying so
        try:
            import_key(members)
        except Ap2SdkError as unusable:
            _refuse(f"the AP2 issuer key file {path}: {unusable}")
    return members


def main(argv: Sequence[str] | None = None) -> int:
    """Run the kit; returns the exit status."""
    parser = _parser()
    options = parser.parse_args(argv)
    if options.max_amount <= 0 or options.timeout <= 0 or options.max_bytes <= 0 or options.concurrency <= 0:
        parser.error("--max-amount, --timeout, --max-bytes and --concurrency must be positive")
    settings = KitSettings(
        merchant_url=options.merchant,
        rpc_url=options.rpc_url,
        payer_key=_key(options.payer_key_file),
        max_amount=options.max_amount,
        timeout_s=options.timeout,
        max_bytes=options.max_bytes,
        concurrency=options.concurrency,
        caller_tokens=_tokens(parser, options.caller_tokens_file),
        only=frozenset(options.only),
        approve_permit2=options.approve_permit2,
        failing_request=options.failing_request,
        ap2_issuer_key=_issuer_key(options.ap2_issuer_key),
        allow_insecure_jwks=options.allow_insecure_jwks,
    )
    try:
        asyncio.run(check_setup(settings.merchant_url, settings.rpc_url, timeout_s=settings.timeout_s))
    except SetupError as error:
        _refuse(str(error))
    report = asyncio.run(run_conformance(settings))
    for path, render in (
        (options.json, render_json),
        (options.markdown, render_markdown),
        (options.junit, render_junit),
    ):
        if path is not None:
            path.write_text(render(report), encoding="utf-8")
    sys.stdout.write(render_console(report, verbose=options.verbose))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
