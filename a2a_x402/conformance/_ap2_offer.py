"""The embedded flow's offer as a client reads it (§20.2, §20.3): the card's ``params.ap2``, the tenants'
checkout keys at their ``jwksUrl``, and the checkout artifact and JWT beside the terms.

Nothing here trusts the merchant: the declaration is read strictly (``schema/ap2.json`` and
``a2a_x402.extension.parse_ap2_declaration``), a JWK Set is fetched through ``UntrustedHttp`` once a run and
must hold only public ES256 P-256 keys named by ``kid``, and a checkout JWT counts only once it verifies with
one of them and keeps §20.3 (its claims' schema, ``id`` = ``offerId``, ``x402`` = ``required``, the
declaration's merchant, the price rule). The merchant's AP2 receipts verify with the same keys (§20.6).
``--allow-insecure-jwks`` (development) lets a ``jwksUrl`` of plain http on the loopback host stand for https,
as ``x402-pay --allow-insecure-jku`` does for the card's keys.
"""

from __future__ import annotations

import copy
import re
import time
from typing import Any
from urllib.parse import urlsplit

from eth_utils.address import is_hex_address, to_checksum_address
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_NAME,
    EXTENSION_URI,
    Ap2Declaration,
    Ap2PriceError,
    ExtensionMetadataError,
    parse_ap2_checkout_data,
    parse_ap2_declaration,
    token_amount_for_total,
)

from ._card import Discovery
from ._context import NotApplicable, Probe, fail
from ._reading import checkout_artifacts_of, state_of
from ._reply import Reply
from ._schema import schema_problems
from ._steps import extension_object

__all__ = [
    "ap2_entries",
    "checkout_jwt_of",
    "check_declaration",
    "checkout_keys",
    "insecure_ok",
    "price_rule",
    "relaxed",
    "tenant_entry",
    "verify_checkout",
    "verify_jws",
]

JSON = Any
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_CLOCK_SKEW_S = 300
_PRIVATE_MEMBER = re.compile(r'("(?:d|p|q|dp|dq|qi|k|oth)"\s*:\s*)("[^"]*"?|\[[^\]]*\]?)')


def _raw_entries(discovery: Discovery) -> JSON:
    declaration = discovery.readings["1.0"].declaration(EXTENSION_URI) or discovery.readings[""].declaration(
        EXTENSION_URI
    )
    params = declaration.get("params") if declaration is not None else None
    return params.get("ap2") if isinstance(params, dict) else None


def insecure_ok(url: JSON, allow: bool) -> bool:
    """Whether ``url`` is a loopback ``http://`` URL that ``--allow-insecure-jwks`` (``allow``) takes."""
    if not allow or not isinstance(url, str) or not url.startswith("http://"):
        return False
    return urlsplit(url).hostname in _LOOPBACK


def relaxed(entries: JSON, allow: bool) -> JSON:
    """``entries`` with each loopback ``http://`` ``jwksUrl`` written as ``https://`` when ``allow``: what
    the schema and the strict reader are given under ``--allow-insecure-jwks``."""
    if not isinstance(entries, list) or not allow:
        return entries
    written = copy.deepcopy(entries)
    for entry in written:
        if isinstance(entry, dict) and insecure_ok(entry.get("jwksUrl"), allow):
            entry["jwksUrl"] = "https://" + entry["jwksUrl"].removeprefix("http://")
    return written


def ap2_entries(probe: Probe) -> tuple[tuple[Ap2Declaration, str], ...]:
    """Each declared tenant's entry with the ``jwksUrl`` to fetch.

    Raises:
        NotApplicable: the card declares no ``params.ap2``.
        CheckFailed: ``params.ap2`` cannot be read.
    """
    run = probe.run
    raw = _raw_entries(run.discovery)
    if raw is None:
        raise NotApplicable("the card declares no params.ap2: the merchant does not offer the embedded flow")
    try:
        entries = parse_ap2_declaration(relaxed(raw, run.allow_insecure_jwks))
    except ExtensionMetadataError as error:
        raise fail(f"params.ap2 cannot be read: {error}") from None
    urls = {str(e.get("tenant", "")): e.get("jwksUrl") for e in raw if isinstance(e, dict)}
    return tuple((entry, str(urls.get(entry.tenant, entry.jwks_url))) for entry in entries)


def tenant_entry(probe: Probe, tenant: str) -> tuple[Ap2Declaration, str]:
    """The declaration of ``tenant`` and its ``jwksUrl``.

    Raises:
        NotApplicable: no ``params.ap2``, or no entry for the tenant.
        CheckFailed: ``params.ap2`` cannot be read.
    """
    for entry, url in ap2_entries(probe):
        if entry.tenant == tenant:
            return entry, url
    raise NotApplicable(f"params.ap2 has no entry for tenant {tenant or '(default)'}")


async def checkout_keys(probe: Probe, url: str) -> KeySet:
    """The JWK Set at ``url`` (read once a run): public ES256 P-256 keys, each with a ``kid``.

    Raises:
        CheckFailed: it does not answer such a set.
    """
    run = probe.run
    if url in run.jwks:
        cached: KeySet = run.jwks[url]
        return cached
    answer = await run.http.request("GET", url, headers={"Accept": "application/json"})
    # A merchant that publishes a private key leaks it; the kit's evidence does not repeat it.
    answer.exchange.answer = _PRIVATE_MEMBER.sub(r'\1"…"', answer.exchange.answer)
    body = answer.body
    keys = body.get("keys") if isinstance(body, dict) and answer.status == 200 else None
    if not isinstance(keys, list) or not keys:
        raise fail(f"the jwksUrl {url} does not answer a JWK Set with keys", answer.exchange)
    for key in keys:
        if not isinstance(key, dict) or (key.get("kty"), key.get("crv")) != ("EC", "P-256"):
            raise fail("the JWK Set holds a key that is not EC P-256", answer.exchange)
        if key.get("alg", "ES256") != "ES256" or not isinstance(key.get("kid"), str) or not key["kid"]:
            raise fail("a key of the JWK Set is not for ES256 or has no kid", answer.exchange)
        if "d" in key:
            raise fail("the JWK Set publishes a private key (member d)", answer.exchange)
    try:
        key_set = KeySet.import_key_set({"keys": keys})
    except (JoseError, ValueError, TypeError) as error:
        raise fail(f"the JWK Set cannot be read: {type(error).__name__}", answer.exchange) from None
    run.jwks[url] = key_set
    return key_set


async def check_declaration(probe: Probe) -> None:
    """``ap2.declaration``: the schema, the tenants, and every ``jwksUrl``."""
    run = probe.run
    raw = _raw_entries(run.discovery)
    if raw is None:
        raise NotApplicable("the card declares no params.ap2: the merchant does not offer the embedded flow")
    for entry in raw if isinstance(raw, list) else []:
        url = entry.get("jwksUrl") if isinstance(entry, dict) else None
        if (
            isinstance(url, str)
            and url.startswith("http://")
            and not insecure_ok(url, run.allow_insecure_jwks)
        ):
            raise fail(
                f"jwksUrl {url} is not https (--allow-insecure-jwks takes loopback http, in development)"
            )
    problems = schema_problems("ap2.json", relaxed(raw, run.allow_insecure_jwks), "Declaration")
    if problems:
        raise fail("params.ap2 does not validate: " + "; ".join(problems))
    entries = ap2_entries(probe)
    served = {i.tenant for i in run.discovery.interfaces if i.version == "1.0"}
    for entry, url in entries:
        if entry.tenant not in served:
            raise fail(
                f"params.ap2 names tenant {entry.tenant or '(default)'}, which no 1.0 interface serves"
            )
        await checkout_keys(probe, url)


def checkout_jwt_of(task: JSON, reply: Reply) -> str:
    """The checkout JWT of the task's one ``ap2-checkout`` artifact, checked for its form (§20.3).

    Raises:
        CheckFailed: no such artifact, more than one, or one not of the form §20.3 gives.
    """
    found = checkout_artifacts_of(task)
    if len(found) != 1:
        raise fail(f"the task carries {len(found)} ap2-checkout artifacts, not one", reply.exchange)
    artifact = found[0]
    if artifact.get("name") != AP2_CHECKOUT_ARTIFACT_NAME:
        raise fail(
            f"the checkout artifact is named {artifact.get('name')!r:.60}, not 'AP2 checkout'", reply.exchange
        )
    extensions = artifact.get("extensions")
    if not isinstance(extensions, list) or EXTENSION_URI not in extensions:
        raise fail("the checkout artifact does not list the extension URI", reply.exchange)
    parts = artifact.get("parts")
    if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], dict):
        raise fail("the checkout artifact does not have exactly one part", reply.exchange)
    if parts[0].get("mediaType") != "application/json":
        raise fail("the checkout's data part is not of mediaType application/json", reply.exchange)
    try:
        return parse_ap2_checkout_data(parts[0].get("data"))
    except ExtensionMetadataError as error:
        raise fail(f"the checkout's data part is malformed: {error}", reply.exchange) from None


def verify_jws(keys: KeySet, token: str, what: str, reply: Reply) -> tuple[JSON, JSON]:
    """The header and claims of ``token`` once its ES256 signature verifies with the key its ``kid`` names.

    Raises:
        CheckFailed: it does not verify, or names no key of the set.
    """
    try:
        decoded = jwt.decode(token, keys, algorithms=["ES256"])
    except (JoseError, ValueError, TypeError) as error:
        raise fail(
            f"{what} does not verify with the jwksUrl keys: {type(error).__name__}", reply.exchange
        ) from None
    if not isinstance(decoded.header.get("kid"), str):
        raise fail(f"{what} names no key (kid)", reply.exchange)
    return decoded.header, decoded.claims


def _total(claims: JSON) -> int:
    totals = [t for t in claims.get("totals", ()) if isinstance(t, dict) and t.get("type") == "total"]
    amount = totals[0].get("amount") if len(totals) == 1 else None
    return amount if isinstance(amount, int) and not isinstance(amount, bool) else -1


def verify_checkout(probe: Probe, keys: KeySet, token: str, entry: Ap2Declaration, reply: Reply) -> JSON:
    """The checkout's claims once they keep §20.3 against the terms of ``reply`` (its task's status).

    Raises:
        CheckFailed: the JWT does not verify, or a claim breaks §20.3.
    """
    _, claims = verify_jws(keys, token, "the checkout JWT", reply)
    problems = schema_problems("ap2.json", claims, "CheckoutClaims")
    if problems:
        raise fail("the checkout's claims do not validate: " + "; ".join(problems), reply.exchange)
    value = _status_object(reply)
    required = value.get("required") if isinstance(value, dict) else None
    accepts = required.get("accepts") if isinstance(required, dict) else None
    if not isinstance(accepts, list) or not accepts:
        raise fail("the status message carries no terms to compare the checkout with", reply.exchange)
    offer_ids = {(e.get("extra") or {}).get("offerId") for e in accepts if isinstance(e, dict)}
    if offer_ids != {claims.get("id")}:
        raise fail(
            f"the checkout's id is not the offerId of every offered entry ({len(offer_ids)} ids)",
            reply.exchange,
        )
    if claims.get("x402") != required:
        raise fail("the checkout's x402 is not the required of the status message", reply.exchange)
    if claims.get("merchant") != entry.merchant.to_wire():
        raise fail("the checkout's merchant is not the declaration's merchant", reply.exchange)
    total, currency = _total(claims), claims.get("currency")
    for offered in accepts:
        price_rule(probe, offered, total, str(currency), reply)
    expires, issued = claims.get("exp"), claims.get("iat")
    if not isinstance(expires, int) or not isinstance(issued, int) or expires <= issued:
        raise fail("the checkout's exp is not after its iat", reply.exchange)
    if expires < time.time() - _CLOCK_SKEW_S:
        raise fail("the checkout of the current terms has already expired", reply.exchange)
    return claims


def price_rule(probe: Probe, offered: JSON, total: int, currency: str, reply: Reply) -> None:
    """The offered entry's ``amount`` is ``total`` (minor units of ``currency``) in the asset's atomic units,
    at par (§20.3); else fails."""
    network, asset = str(offered.get("network")), str(offered.get("asset"))
    listed = probe.run.discovery.assets.get(
        (network, to_checksum_address(asset) if is_hex_address(asset) else asset)
    )
    decimals = listed.get("decimals") if isinstance(listed, dict) else None
    if not isinstance(decimals, int):
        raise fail(
            f"params.assets gives no decimals for {asset} on {network} (§20.2 needs them)", reply.exchange
        )
    try:
        expected = token_amount_for_total(total, decimals=decimals, currency=currency)
    except Ap2PriceError as error:
        raise fail(f"the checkout's total cannot be priced: {error}", reply.exchange) from None
    if offered.get("amount") != str(expected):
        raise fail(
            f"the price rule is broken: a total of {total} {currency} is {expected} atomic units, the entry "
            f"asks {offered.get('amount')!r:.40}",
            reply.exchange,
        )


def _status_object(reply: Reply) -> JSON:
    task = reply.task
    return extension_object(task) if state_of(task) else None
