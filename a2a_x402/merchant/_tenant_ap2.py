"""A tenant's part in the embedded flow (specification §20): the `ap2` table of its entry in the tenants file.

    [tenants.acme.ap2]              # or [default.ap2] for the default tenant
    merchant = { id = "acme.example", name = "Acme", website = "https://acme.example" }
    checkout_keys = ["acme-checkout.pem"]    # PEM EC P-256 private keys: the first signs, all are published
    issuers = ["surface.jwks.json", "https://agents.example/ap2/jwks.json"]
                                             # optional: JWK Sets (files or https URLs) of the mandate
                                             # issuers trusted here
    required = false                         # optional: every payment must come with mandates
    currency = "USD"                         # optional: the checkout's currency, the token taken at par

Relative paths are read from the tenants file's directory. The files are read as the file is parsed, so a
key that is not P-256, or an issuer file that is not a JWK Set of public P-256 keys, is a problem of the
file like any other (one line naming the file, never its content). An `https://` issuer (plain `http://`
only on loopback) is fetched when mandates need it, not here (`ap2._issuers.TrustedIssuers`). Which keys
and merchant ids two tenants may not share is `_tenant_rules.ap2_sharing_problems`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a_x402.extension import Ap2Merchant, Ap2PriceError, minor_unit_exponent

from ._tenant_rules import describe, is_http_url
from .ap2._issuers import check_issuer_url
from .ap2._keys import CheckoutKeyError, CheckoutKeys, load_checkout_keys
from .ap2._sdk import IssuerKeys

__all__ = ["AP2_KEYS", "TenantAp2", "parse_ap2"]

AP2_KEYS = ("merchant", "checkout_keys", "issuers", "required", "currency")
"""The keys of a tenant's `ap2` table."""

_MERCHANT_KEYS = ("id", "name", "website")
_MAX_CHARS = 2048
_ISSUER_FILE_MAX_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantAp2:
    """A tenant that offers the embedded flow: who it is in mandates, its checkout keys (loaded), the issuer
    keys it trusts for mandates (those of its files, loaded; its `https` sources, by URL), whether mandates
    are required, and the currency its checkouts are in."""

    merchant: Ap2Merchant
    checkout_keys: CheckoutKeys = field(repr=False)
    checkout_key_files: tuple[str, ...]
    issuers: IssuerKeys = field(default_factory=lambda: IssuerKeys({}), repr=False)
    issuer_files: tuple[str, ...] = ()
    issuer_urls: tuple[str, ...] = ()
    required: bool = False
    currency: str = "USD"

    @property
    def merchant_id(self) -> str:
        """The AP2 merchant id: the audience of the mandates presented to the tenant."""
        return self.merchant.id

    @property
    def checkout_kids(self) -> tuple[tuple[str, str], ...]:
        """Each checkout key's `kid` with the file it was read from, the signing key first."""
        return tuple(zip(self.checkout_keys.kids, self.checkout_key_files, strict=True))


def parse_ap2(where: str, table: Any, base: Path, *, tenant: str) -> tuple[TenantAp2 | None, list[str]]:
    """The `ap2` table at `where` (`tenants.acme.ap2`), its files read from `base`, and its problems; None
    and none for a tenant without one (`table` None)."""
    if table is None:
        return None, []
    if not isinstance(table, dict):
        return None, [f"{where}: must be a table, got {describe(table)[:200]}"]
    allowed = ", ".join(AP2_KEYS)
    problems = [f"{where}.{key}: unknown key (allowed: {allowed})" for key in table if key not in AP2_KEYS]
    problems += [f"{where}.{key}: is required" for key in ("merchant", "checkout_keys") if key not in table]
    merchant, merchant_problems = _merchant(f"{where}.merchant", table.get("merchant", {}))
    problems += merchant_problems if "merchant" in table else []
    required = table.get("required", False)
    if not isinstance(required, bool):
        problems.append(f"{where}.required: must be true or false, got {describe(required)[:200]}")
    currency = table.get("currency", "USD")
    try:
        minor_unit_exponent(currency)
    except Ap2PriceError as exc:
        problems.append(f"{where}.currency: {exc}")
    # A missing `checkout_keys` is said once, as required.
    keys_at, declared = f"{where}.checkout_keys", "checkout_keys" in table
    key_files = _paths(keys_at, table.get("checkout_keys", []), base, problems, empty=not declared)
    issuer_files, issuer_urls = _issuer_sources(f"{where}.issuers", table.get("issuers", []), base, problems)
    keys: CheckoutKeys | None = None
    try:
        keys = load_checkout_keys(key_files, tenant=tenant) if key_files else None
    except CheckoutKeyError as exc:
        problems.append(f"{where}.checkout_keys: {exc}")
    issuers = _issuers(f"{where}.issuers", issuer_files, problems)
    if problems or keys is None or merchant is None:
        return None, problems
    return TenantAp2(
        merchant=merchant,
        checkout_keys=keys,
        checkout_key_files=tuple(str(path) for path in key_files),
        issuers=issuers,
        issuer_files=tuple(str(path) for path in issuer_files),
        issuer_urls=issuer_urls,
        required=required,
        currency=currency,
    ), []


def _merchant(where: str, value: Any) -> tuple[Ap2Merchant | None, list[str]]:
    if not isinstance(value, dict):
        return None, [f"{where}: must be a table {{id, name, website}}, got {describe(value)[:200]}"]
    allowed = ", ".join(_MERCHANT_KEYS)
    problems = [
        f"{where}.{key}: unknown key (allowed: {allowed})" for key in value if key not in _MERCHANT_KEYS
    ]
    for key in ("id", "name", "website"):
        text = value.get(key)
        if key not in value and key != "website":
            problems.append(f"{where}.{key}: is required")
        elif key in value and (not isinstance(text, str) or not text.strip() or len(text) > _MAX_CHARS):
            problems.append(f"{where}.{key}: must be a non-empty string, got {describe(text)[:200]}")
    website = value.get("website")
    if isinstance(website, str) and website.strip() and not is_http_url(website):
        problems.append(f"{where}.website: must be an absolute http(s) URL, got {website[:200]!r}")
    if problems:
        return None, problems
    return Ap2Merchant(id=value["id"], name=value["name"], website=website), []


def _paths(where: str, value: Any, base: Path, problems: list[str], *, empty: bool = False) -> list[Path]:
    """The file paths of an array of strings, relative ones read from `base`; its problems to `problems`."""
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        problems.append(f"{where}: must be an array of file paths, got {describe(value)[:200]}")
        return []
    if not value and not empty:
        problems.append(f"{where}: needs at least one file")
    found: list[Path] = []
    for index, item in enumerate(value):
        if item.startswith(("https://", "http://")):
            problems.append(f"{where}[{index}]: {item[:200]}: must be a file path")
            continue
        found.append(base / Path(item).expanduser())
    return found


def _issuer_sources(
    where: str, value: Any, base: Path, problems: list[str]
) -> tuple[list[Path], tuple[str, ...]]:
    """The issuer files and URLs of `issuers`, in order; its problems to `problems`."""
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        problems.append(f"{where}: must be an array of file paths or https URLs, got {describe(value)[:200]}")
        return [], ()
    urls: list[str] = []
    files: list[str] = []
    for index, item in enumerate(value):
        if not item.lower().startswith(("https://", "http://")):
            files.append(item)
            continue
        try:
            check_issuer_url(item)
        except ValueError as exc:
            # Not quoted: a URL with user info may carry a password.
            problems.append(f"{where}[{index}]: {exc}")
            continue
        if item in urls:
            problems.append(f"{where}[{index}]: {item[:200]}: is given twice")
        urls.append(item)
    return _paths(where, files, base, problems, empty=True), tuple(dict.fromkeys(urls))


def _issuers(where: str, files: list[Path], problems: list[str]) -> IssuerKeys:
    """The issuer keys of every file, by `kid`; a `kid` in two files is a problem."""
    by_kid: dict[str, Any] = {}
    for path in files:
        try:
            with path.open("rb") as handle:
                data = handle.read(_ISSUER_FILE_MAX_BYTES + 1)
            if len(data) > _ISSUER_FILE_MAX_BYTES:
                raise ValueError(f"larger than {_ISSUER_FILE_MAX_BYTES} bytes")
            document = json.loads(data)
            if not isinstance(document, dict):
                raise ValueError("not a JWK Set (a JSON object with keys)")
            keys = IssuerKeys.from_jwks(document)
        except OSError as exc:
            problems.append(
                f"{where}: issuer file {path}: cannot be read ({exc.strerror or type(exc).__name__})"
            )
            continue
        except ValueError as exc:
            # json's messages give a position, never the text; IssuerKeys' name a kid at most.
            problems.append(f"{where}: issuer file {path}: {str(exc).splitlines()[0][:200]}")
            continue
        for kid, jwk in keys.by_kid.items():
            if kid in by_kid:
                problems.append(f"{where}: issuer file {path}: the kid {kid[:64]!r} is in another file too")
            by_kid[kid] = jwk
    return IssuerKeys(by_kid)
