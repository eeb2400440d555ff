"""The checks of a named tenant's own A2A 0.3 card (§12.1): served, declaring v0.2, its interfaces, its payTo.

A 0.3 request carries no tenant, so a 0.3 client of a named tenant starts from a base URL of the tenant's
own and reads the card there; that card must send it to the tenant's interfaces and payees, no other's.
"""

from __future__ import annotations

from a2a_x402.extension import EXTENSION_URI_V02

from ._card import CardReading, Discovery, interfaces_0_3, interfaces_of
from ._context import Probe, fail
from ._http import Exchange

__all__ = ["TENANT_CARD_CHECKS", "tenant_card_checks", "tenant_card_target"]

TENANT_CARD_CHECKS = (
    "card.tenant-0-3-served",
    "card.tenant-0-3-declares",
    "card.tenant-0-3-interfaces",
    "card.tenant-0-3-pay-to",
)


def tenant_card_target(tenant: str) -> str:
    """How reports name a tenant's own 0.3 card."""
    return f"card tenant={tenant} A2A-Version=0.3"


async def tenant_card_checks(probe: Probe, tenant: str, discovery: Discovery) -> None:
    """The checks of ``tenant``'s own 0.3 card (``probe`` is that card's target)."""
    reading = discovery.tenant_cards[tenant]
    exchange = (
        reading.answer.exchange if reading.answer else (reading.fault.exchange if reading.fault else None)
    )
    async with probe.check("card.tenant-0-3-served"):
        if reading.card is None:
            raise fail(
                f"no 0.3 card for tenant {tenant} under its interfaces' URLs: {reading.problem}", exchange
            )
    if probe.failed:
        return
    declaration = reading.declaration(EXTENSION_URI_V02)
    async with probe.check("card.tenant-0-3-declares"):
        if declaration is None or declaration.get("required") is not True:
            raise fail(f"the card does not declare {EXTENSION_URI_V02} with required: true", exchange)
    async with probe.check("card.tenant-0-3-interfaces"):
        _same_interfaces(reading, tenant, discovery, exchange)
    async with probe.check("card.tenant-0-3-pay-to"):
        own = {(net, a) for (net, t), addresses in discovery.payees.items() if t == tenant for a in addresses}
        listed = discovery.tenant_payees.get(tenant, frozenset())
        if not listed:
            raise fail("the v0.2 declaration's params.payTo lists no checksummed address", exchange)
        foreign = sorted(f"{a} on {net}" for net, a in listed - own)
        if foreign:
            raise fail(
                f"params.payTo lists addresses the 1.0 card does not give tenant {tenant}: {foreign}",
                exchange,
            )


def _same_interfaces(
    reading: CardReading, tenant: str, discovery: Discovery, exchange: Exchange | None
) -> None:
    own = {(i.url, i.binding) for i in interfaces_0_3(reading.card or {}, tenant)}
    main = discovery.readings["1.0"].card or discovery.readings[""].card or {}
    listed = {(i.url, i.binding) for i in interfaces_of(main) if i.version == "0.3" and i.tenant == tenant}
    if listed - own:
        missing = sorted(listed - own)
        raise fail(f"the card omits 0.3 interfaces the 1.0 card lists for the tenant: {missing}", exchange)
    others = {(i.url, i.binding) for i in discovery.interfaces if i.version == "0.3" and i.tenant != tenant}
    if own & others:
        raise fail(f"the card lists 0.3 interfaces of another tenant: {sorted(own & others)}", exchange)
