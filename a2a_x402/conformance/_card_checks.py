"""The checks of the Agent Card: each reading the merchant serves, and the declaration in it."""

from __future__ import annotations

from typing import Any

from eth_utils.address import is_checksum_address

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02

from ._ap2_offer import relaxed
from ._card import CardReading, Discovery
from ._context import NotApplicable, Probe, fail
from ._schema import schema_problems

__all__ = ["CARD_CHECKS", "card_checks"]

JSON = Any
CARD_CHECKS = (
    "card.served",
    "card.declares-extension",
    "card.required",
    "card.params-present",
    "card.params-schema",
    "card.params-consistent",
    "card.pay-to-per-tenant",
    "card.no-empty-tenant",
)
_READING_URIS = {"1.0": (EXTENSION_URI,), "0.3": (EXTENSION_URI_V02,), "": (EXTENSION_URI_V02, EXTENSION_URI)}


def reading_target(version: str) -> str:
    """How reports name a card reading."""
    return f"card A2A-Version={version}" if version else "card (no A2A-Version)"


async def card_checks(
    probe: Probe,
    reading: CardReading,
    discovery: Discovery,
    both_versions: bool,
    *,
    allow_insecure_jwks: bool = False,
) -> None:
    """The card checks of one reading (``probe`` is that reading's target); ``allow_insecure_jwks``: a
    loopback http ``jwksUrl`` of ``params.ap2`` stands for https (development)."""
    exchange = (
        reading.answer.exchange if reading.answer else (reading.fault.exchange if reading.fault else None)
    )
    async with probe.check("card.served"):
        if reading.card is None:
            raise fail(f"no usable card: {reading.problem}", exchange)
        if reading.version == "1.0" and not discovery.interfaces:
            raise fail("the card lists no A2A 1.0 or 0.3 interface the kit can test", exchange)
    if probe.failed:
        return
    uris = _READING_URIS[reading.version] if both_versions or reading.version else (EXTENSION_URI,)
    declarations = {uri: reading.declaration(uri) for uri in uris}
    async with probe.check("card.declares-extension"):
        missing = [uri for uri, declaration in declarations.items() if declaration is None]
        if missing:
            raise fail(f"capabilities.extensions does not declare {missing}", exchange)
    async with probe.check("card.required"):
        if any(d is not None and d.get("required") is not True for d in declarations.values()):
            raise fail("a declaration does not say required: true", exchange)
    ours = declarations.get(EXTENSION_URI)
    params = ours.get("params") if ours is not None else None
    for check_id in CARD_CHECKS[3:]:
        async with probe.check(check_id):
            if ours is None:
                raise NotApplicable(
                    "this reading declares only v0.2, whose params the specification leaves open"
                )
            if isinstance(params, dict) and "ap2" in params:
                params = {**params, "ap2": relaxed(params["ap2"], allow_insecure_jwks)}
            _params_check(check_id, params, discovery, exchange)
    if reading.version == "1.0":
        async with probe.check("card.vary"):
            if not both_versions:
                raise NotApplicable("the merchant serves one A2A version")
            vary = reading.answer.headers.get("vary", "") if reading.answer else ""
            if "a2a-version" not in vary.lower():
                raise fail("the card answer has no Vary: A2A-Version", exchange)
    if reading.version == "":
        async with probe.check("card.unversioned-lists-both"):
            if not both_versions:
                raise NotApplicable("the merchant serves one A2A version")
            if any(
                d is None
                for d in (reading.declaration(EXTENSION_URI), reading.declaration(EXTENSION_URI_V02))
            ):
                raise fail("the card for both versions does not list both URIs", exchange)


def _params_check(check_id: str, params: JSON, discovery: Discovery, exchange: Any) -> None:
    if check_id == "card.params-present":
        if params is None:
            raise fail("the declaration has no params", exchange)
        return
    if params is None:
        raise NotApplicable("the declaration has no params")
    if check_id == "card.params-schema":
        problems = schema_problems("card-params.json", params)
        if problems:
            raise fail("params does not validate: " + "; ".join(problems), exchange)
    elif check_id == "card.params-consistent":
        networks = params.get("networks") if isinstance(params, dict) else None
        for member in ("assets", "payTo"):
            for entry in params.get(member) or [] if isinstance(params, dict) else []:
                if (
                    not isinstance(entry, dict)
                    or not isinstance(networks, list)
                    or entry.get("network") not in networks
                ):
                    raise fail(f"an entry of {member} is not on a listed network: {entry!r:.200}", exchange)
                address = entry.get("address")
                if not isinstance(address, str) or not (
                    is_checksum_address(address) or address == address.lower()
                ):
                    raise fail(f"an address of {member} is not checksummed: {address!r:.80}", exchange)
    elif check_id == "card.pay-to-per-tenant":
        tenants = {i.tenant for i in discovery.interfaces if i.version == "1.0"}
        listed = {tenant for (_, tenant) in discovery.payees}
        missing = sorted(tenants - listed)
        if missing:
            raise fail(f"params.payTo lists no address for the tenants {missing}", exchange)
    elif check_id == "card.no-empty-tenant":
        if any(isinstance(p, dict) and p.get("tenant") == "" for p in params.get("payTo") or []):
            raise fail('params.payTo writes "tenant": ""', exchange)
