"""Rotating a tenant's AP2 checkout keys (§20.1): a new key file first in `checkout_keys`, and an old one
dropped once nothing it signed can still be paid. `x402-merchant ap2-keys` (`_ap2_keys_cli`) runs these.

The tenants file is edited as text, so that its comments and layout stay: only the `checkout_keys` array of
the tenant's `ap2` table is rewritten, on one line. The edited text is checked before it replaces the file
(parsed again, the array as intended, the whole file valid as the merchant reads it, the new key loaded),
and it replaces the file in one rename: a mistake leaves the file as it was.

A key may be retired when no stored offer of the tenant whose checkout it signed can still be paid: the
checkout's `exp` has passed (its mandates no longer verify, and its terms, which expire with it, can no
longer be paid) and no payment of its round is being taken (`working`, `settling`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy.ext.asyncio import AsyncEngine

from ._tenant_ap2 import TenantAp2
from .ap2 import load_checkout_keys
from .payments import OfferState
from .tenants import DEFAULT_TENANT, TenantRegistry, UnknownTenantError, tenant_name

__all__ = ["Ap2KeyError", "KeyChange", "Payable", "payable_offers", "retire_key", "rotate_key"]

_TAKING = (OfferState.WORKING.value, OfferState.SETTLING.value)
# Read by name, not through the payments package's table: this module needs three columns of it.
_OFFERS = sa.table(
    "payment_offers", sa.column("task_id"), sa.column("tenant"), sa.column("state"), sa.column("checkout_jwt")
)


class Ap2KeyError(ValueError):
    """A rotation or retirement that cannot be done as asked: one line, nothing changed."""


@dataclass(frozen=True, slots=True)
class KeyChange:
    """What a rotation or retirement changed: the tenant's `checkout_keys` before and after, and the key."""

    tenant: str
    table: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    kid: str
    key_file: Path


@dataclass(frozen=True, slots=True)
class Payable:
    """The stored offers signed with a key that can still be paid: how many, and the last checkout `exp`."""

    count: int
    last_exp: int | None


def rotate_key(tenants_file: Path, tenant_id: str, *, now: datetime) -> KeyChange:
    """Write a new P-256 checkout key (mode 0600) beside the tenant's signing key and put it first in the
    tenant's `checkout_keys`.

    Raises:
        Ap2KeyError: the tenant has no `ap2` table, or the file cannot be edited as asked.
        TenantConfigError / UnknownTenantError: the file is invalid, or names no such tenant.
    """
    keys, table, _ = _declared(tenants_file, tenant_id)
    signing = Path(_resolved(tenants_file, keys[0]))
    stem = f"{tenant_name(tenant_id)}-checkout-{now:%Y%m%dT%H%M%SZ}"
    path = signing.parent / f"{stem}.pem"
    suffix = 1
    while path.exists():
        suffix += 1
        path = signing.parent / f"{stem}-{suffix}.pem"
    _write_new_key(path)
    entry = _entry_for(tenants_file, path)
    try:
        kid = load_checkout_keys([path], tenant=tenant_id).signing_kid
        _replace_array(tenants_file, tenant_id, table, [entry, *keys])
    except BaseException:
        # The file was not changed: the key it would have named goes too.
        path.unlink(missing_ok=True)
        raise
    return KeyChange(tenant_id, table, tuple(keys), (entry, *keys), kid, path)


def retire_key(
    tenants_file: Path, tenant_id: str, key_file: str, payable_of: Callable[[str], Payable]
) -> KeyChange:
    """Drop `key_file` from the tenant's `checkout_keys` if no stored offer it signed can still be paid
    (`payable_of(kid)`, which `payable_offers` answers). The key file itself stays where it is.

    Raises:
        Ap2KeyError: `key_file` is not one of the tenant's keys, is the one that signs, or signed offers
            that can still be paid.
        TenantConfigError / UnknownTenantError: the file is invalid, or names no such tenant.
    """
    keys, table, ap2 = _declared(tenants_file, tenant_id)
    name = tenant_name(tenant_id)
    # The file as the tenants file names it (from its directory), or as a path from here.
    given = Path(key_file).expanduser()
    wanted = {given.resolve(), (tenants_file.parent / given).resolve()}
    found = [index for index, (_, path) in enumerate(ap2.checkout_kids) if Path(path).resolve() in wanted]
    if not found:
        raise Ap2KeyError(f"{key_file} is not a checkout key of tenant {name} ({', '.join(keys)})")
    index = found[0]
    kid = ap2.checkout_kids[index][0]
    if index == 0:
        raise Ap2KeyError(
            f"{key_file} (kid {kid}) is the key that signs tenant {name}'s checkouts: "
            f"rotate first (x402-merchant ap2-keys rotate --tenant {name})"
        )
    payable = payable_of(kid)
    if payable.count:
        until = (
            datetime.fromtimestamp(payable.last_exp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            if payable.last_exp is not None
            else "their payments are settled"
        )
        raise Ap2KeyError(
            f"{key_file} (kid {kid}) signed {payable.count} offer(s) of tenant {name} that can still be "
            f"paid: retire it once their checkouts have expired and their rounds ended (not before {until})"
        )
    after = [entry for position, entry in enumerate(keys) if position != index]
    _replace_array(tenants_file, tenant_id, table, after)
    return KeyChange(tenant_id, table, tuple(keys), tuple(after), kid, Path(ap2.checkout_kids[index][1]))


async def payable_offers(engine: AsyncEngine, tenant_id: str, kid: str, *, now: int) -> Payable:
    """The tenant's stored offers whose checkout `kid` signed and that can still be paid at `now`: their
    checkout has not expired, or a payment of their round is being taken."""
    query = sa.select(_OFFERS.c.state, _OFFERS.c.checkout_jwt).where(
        _OFFERS.c.tenant == tenant_id, _OFFERS.c.checkout_jwt.is_not(None)
    )
    count, last_exp = 0, 0
    async with engine.connect() as connection:
        async for state, token in await connection.stream(query):
            header, claims = _unverified(token)
            if header.get("kid") != kid:
                continue
            expires = claims.get("exp")
            expired = isinstance(expires, int) and expires < now
            if not expired or state in _TAKING:
                count += 1
                if isinstance(expires, int):
                    last_exp = max(expires, last_exp)
    # A payment being taken under an expired checkout: its round ends when it is settled, not at a time.
    return Payable(count, last_exp if last_exp >= now else None)


def _declared(tenants_file: Path, tenant_id: str) -> tuple[list[str], str, TenantAp2]:
    """The tenant's `checkout_keys` as written, the name of its `ap2` table, and the table as read."""
    registry = TenantRegistry.from_toml(tenants_file)
    tenant = registry.get(tenant_id)
    if tenant is None:
        raise UnknownTenantError(tenant_id, [t.id for t in registry])
    table = "default.ap2" if tenant_id == DEFAULT_TENANT else f"tenants.{tenant_id}.ap2"
    if tenant.ap2 is None:
        raise Ap2KeyError(
            f"tenant {tenant_name(tenant_id)} has no [{table}] table: it is not in the embedded flow"
        )
    with tenants_file.open("rb") as handle:
        document = tomllib.load(handle)
    section = document.get("default", {}) if tenant_id == DEFAULT_TENANT else document["tenants"][tenant_id]
    return list(section["ap2"]["checkout_keys"]), table, tenant.ap2


def _resolved(tenants_file: Path, entry: str) -> str:
    return str(tenants_file.parent / Path(entry).expanduser())


def _entry_for(tenants_file: Path, path: Path) -> str:
    """How the tenants file names `path`: relative to its directory when inside it, else absolute."""
    try:
        return str(path.resolve().relative_to(tenants_file.parent.resolve()))
    except ValueError:
        return str(path.resolve())


def _write_new_key(path: Path) -> None:
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        # O_EXCL: never over another file; 0600 from the start, not after the key is in it.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise Ap2KeyError(f"cannot write the new key file {path}: {exc.strerror or exc}") from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(pem)


def _replace_array(tenants_file: Path, tenant_id: str, table: str, keys: Sequence[str]) -> None:
    """Rewrite the `checkout_keys` array of `table` as `keys`, check the result, and replace the file."""
    text = tenants_file.read_text(encoding="utf-8")
    span = _array_span(text, table)
    if span is None:
        raise Ap2KeyError(
            f"{tenants_file}: cannot find `checkout_keys = [...]` under [{table}] to edit; "
            f"set it by hand to [{', '.join(json.dumps(key) for key in keys)}]"
        )
    edited = text[: span[0]] + "[" + ", ".join(json.dumps(key) for key in keys) + "]" + text[span[1] :]
    temporary = tenants_file.with_name(f".{tenants_file.name}.ap2-keys.tmp")
    try:
        temporary.write_text(edited, encoding="utf-8")
        os.chmod(temporary, tenants_file.stat().st_mode & 0o777)
        after, _, _ = _declared(temporary, tenant_id)
        if after != list(keys):
            raise Ap2KeyError(
                f"{tenants_file}: the edit did not give [{table}] the keys intended; edit by hand"
            )
        os.replace(temporary, tenants_file)
    finally:
        temporary.unlink(missing_ok=True)


def _array_span(text: str, table: str) -> tuple[int, int] | None:
    """Where the `checkout_keys` array of `[table]` is in `text` (from its `[` to past its `]`)."""
    parts = [re.escape(part) for part in table.split(".")]
    header = r"\s*\.\s*".join(rf"(?:{part}|\"{part}\"|'{part}')" for part in parts)
    start = re.search(rf"(?m)^[ \t]*\[[ \t]*{header}[ \t]*\][ \t]*(?:#.*)?$", text)
    if start is None:
        return None
    following = re.search(r"(?m)^[ \t]*\[", text[start.end() :])
    end = start.end() + following.start() if following else len(text)
    key = re.search(r"(?m)^[ \t]*checkout_keys[ \t]*=[ \t]*\[", text[start.end() : end])
    if key is None:
        return None
    opening = start.end() + key.end() - 1
    closing = _closing_bracket(text, opening)
    return None if closing is None else (opening, closing + 1)


def _closing_bracket(text: str, opening: int) -> int | None:
    """The index of the `]` closing the array opened at `opening`, past strings and comments."""
    index, depth = opening, 0
    while index < len(text):
        char = text[index]
        if char == "#":
            index = text.find("\n", index)
            if index < 0:
                return None
        elif char in "\"'":
            end = _string_end(text, index)
            if end is None:
                return None
            index = end
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return None


def _string_end(text: str, start: int) -> int | None:
    quote, index = text[start], start + 1
    while index < len(text) and text[index] != "\n":
        if text[index] == "\\" and quote == '"':
            index += 2
            continue
        if text[index] == quote:
            return index
        index += 1
    return None


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a stored compact JWS, unverified (the merchant's own rows)."""
    try:
        header, claims = (
            json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
            for part in token.split(".")[:2]
        )
    except ValueError:
        return {}, {}
    return (header if isinstance(header, dict) else {}), (claims if isinstance(claims, dict) else {})
