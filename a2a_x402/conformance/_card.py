"""Discovering what to test from a merchant's Agent Card: interfaces, declarations, payees and assets.

The card is fetched three times, as the clients of each version fetch it (``A2A-Version: 1.0``, ``A2A-Version:
0.3`` and no version, §13), through ``UntrustedHttp``; each named tenant the card gives 0.3 interfaces is
asked for its own 0.3 card (§12.1) at the well-known path under the nearest base of those interfaces' URLs
that serves one (its 0.3 interfaces join the ones to test). Nothing in it is trusted: every member read is
type-checked here, a card that cannot be read at all becomes a failed ``card.served`` check, and the payees
and assets the card lists are what the kit is willing to sign for (``Discovery.allows``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from eth_utils.address import is_checksum_address, is_hex_address, to_checksum_address

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02

from ._http import Answer, MerchantFault, UntrustedHttp

__all__ = [
    "CARD_PATH",
    "CardReading",
    "Discovery",
    "Interface",
    "card_url_of",
    "discover",
    "interfaces_0_3",
    "interfaces_of",
    "tenant_card_urls",
]

JSON = Any
CARD_PATH = "/.well-known/agent-card.json"
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
_READINGS = ("1.0", "0.3", "")


@dataclass(frozen=True, slots=True)
class Interface:
    """One interface of the card: where, which binding, which A2A version, which tenant."""

    url: str
    binding: str
    version: str
    """``"1.0"`` or ``"0.3"``."""
    tenant: str = ""
    own_card_only: bool = False
    """Listed by the tenant's own 0.3 card only, not by the 1.0 card."""

    @property
    def label(self) -> str:
        """How reports name the interface, e.g. ``JSONRPC 1.0 tenant=acme``."""
        label = f"{self.binding} {self.version} tenant={self.tenant or '(default)'}"
        return f"{label} {self.url} (its 0.3 card only)" if self.own_card_only else label


@dataclass
class CardReading:
    """The card served to one ``A2A-Version`` (``""``: none sent)."""

    version: str
    answer: Answer | None = None
    card: dict[str, JSON] | None = None
    url: str = ""
    fault: MerchantFault | None = None
    problem: str = ""
    """Why the answer is not a usable card (empty when it is)."""

    def declaration(self, uri: str) -> dict[str, JSON] | None:
        """The ``capabilities.extensions`` entry for ``uri``, if it is an object."""
        capabilities = (self.card or {}).get("capabilities")
        extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
        for entry in extensions if isinstance(extensions, list) else []:
            if isinstance(entry, dict) and entry.get("uri") == uri:
                return entry
        return None


@dataclass
class Discovery:
    """What the card says: readings per version, the interfaces to test, and what may be paid."""

    card_url: str
    readings: dict[str, CardReading]
    interfaces: list[Interface] = field(default_factory=list)
    payees: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    """``(network, tenant)`` → checksummed payTo addresses listed for it (v0.3 declaration)."""
    assets: dict[tuple[str, str], dict[str, JSON]] = field(default_factory=dict)
    """``(network, checksummed address)`` → the asset entry listed."""
    networks: frozenset[str] = frozenset()
    tenant_cards: dict[str, CardReading] = field(default_factory=dict)
    """Named tenant → the last reading of its own 0.3 card (the served one, if any URL served one)."""
    tenant_payees: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    """Named tenant → ``(network, checksummed payTo)`` its own 0.3 card's v0.2 declaration lists."""
    ap2_required: frozenset[str] = frozenset()
    """The tenants ``params.ap2`` declares ``required: true``: they take payments only with mandates."""
    ap2_v02: dict[str, dict[str, JSON]] = field(default_factory=dict)
    """Tenant → its entry in ``params.ap2`` of a 0.3 card's v0.2 declaration (the merchant's 0.3 card, or
    the tenant's own): the tenants offered the embedded flow's v0.2 form on A2A 0.3 (§20.7), as read."""
    request_text: str = "The quick brown fox jumps over the lazy dog. The dog sleeps."
    """What the kit asks for: the first example of the card's first skill."""

    def allows(self, network: str, asset: str, pay_to: str, tenant: str) -> str:
        """Why the kit must not sign a payment of ``asset`` on ``network`` to ``pay_to`` (``""``: it may)."""
        if network not in self.networks:
            return f"the card does not list the network {network}"
        if (network, _checksum(asset)) not in self.assets:
            return f"the card does not list the asset {asset} on {network}"
        if _checksum(pay_to) not in self.payees.get((network, tenant), frozenset()):
            return f"the card does not list payTo {pay_to} for tenant {tenant or '(default)'} on {network}"
        return ""

    def listed_pay_tos(self, network: str) -> frozenset[str]:
        """Every payTo the card lists on ``network``, whatever the tenant."""
        return frozenset(
            a for (net, _), addresses in self.payees.items() if net == network for a in addresses
        )


def card_url_of(url: str) -> str:
    """The card URL for ``url``: a base URL gets the well-known path, a URL with a path is kept."""
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        return urlunsplit((parts.scheme, parts.netloc, CARD_PATH, "", ""))
    return url


def _checksum(address: str) -> str:
    return to_checksum_address(address) if is_hex_address(address) else address


def _address(value: JSON) -> str | None:
    if not isinstance(value, str) or not is_hex_address(value):
        return None
    if value != value.lower() and not is_checksum_address(value):
        return None
    return to_checksum_address(value)


async def _read(http: UntrustedHttp, url: str, version: str) -> CardReading:
    reading = CardReading(version, url=url)
    headers = {"A2A-Version": version} if version else {}
    try:
        reading.answer = await http.request("GET", url, headers=headers)
    except MerchantFault as fault:
        reading.fault = fault
        reading.problem = str(fault)
        return reading
    if reading.answer.status != 200:
        reading.problem = f"HTTP {reading.answer.status}, not 200"
    elif not isinstance(reading.answer.body, dict):
        reading.problem = "the card is not a JSON object"
    else:
        reading.card = reading.answer.body
    return reading


def interfaces_of(card: dict[str, JSON]) -> list[Interface]:
    """The interfaces a 1.0 card lists that the kit can test (1.0 on every binding, 0.3 but gRPC)."""
    found: list[Interface] = []
    listed = card.get("supportedInterfaces")
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, dict):
            continue
        url, binding, version = entry.get("url"), entry.get("protocolBinding"), entry.get("protocolVersion")
        tenant = entry.get("tenant", "")
        if not (isinstance(url, str) and binding in BINDINGS and isinstance(version, str)):
            continue
        if not isinstance(tenant, str):
            continue
        family = "1.0" if version.startswith("1.") else "0.3" if version.startswith("0.3") else ""
        if family and (family, binding) != ("0.3", "GRPC"):
            interface = Interface(url, binding, family, tenant)
            if interface not in found:
                found.append(interface)
    return found


def interfaces_0_3(card: dict[str, JSON], tenant: str = "") -> list[Interface]:
    """A 0.3 card's interfaces (``url``, ``additionalInterfaces``), as ``tenant``'s."""
    found: list[Interface] = []
    pairs = [(card.get("url"), card.get("preferredTransport", "JSONRPC"))]
    extra = card.get("additionalInterfaces")
    pairs += (
        [(e.get("url"), e.get("transport")) for e in extra if isinstance(e, dict)]
        if isinstance(extra, list)
        else []
    )
    for url, transport in pairs:
        if isinstance(url, str) and transport in ("JSONRPC", "HTTP+JSON"):
            interface = Interface(url, str(transport), "0.3", tenant)
            if interface not in found:
                found.append(interface)
    return found


def _read_params(discovery: Discovery, params: JSON) -> None:
    if not isinstance(params, dict):
        return
    networks = params.get("networks")
    discovery.networks = (
        frozenset(n for n in networks if isinstance(n, str)) if isinstance(networks, list) else frozenset()
    )
    assets = params.get("assets")
    for asset in assets if isinstance(assets, list) else []:
        if isinstance(asset, dict) and isinstance(asset.get("network"), str):
            address = _address(asset.get("address"))
            if address is not None:
                discovery.assets[(asset["network"], address)] = asset
    payees: dict[tuple[str, str], set[str]] = {}
    pay_to = params.get("payTo")
    for payee in pay_to if isinstance(pay_to, list) else []:
        if not isinstance(payee, dict) or not isinstance(payee.get("network"), str):
            continue
        tenant = payee.get("tenant", "")
        address = _address(payee.get("address"))
        if isinstance(tenant, str) and address is not None:
            payees.setdefault((payee["network"], tenant), set()).add(address)
    discovery.payees = {key: frozenset(value) for key, value in payees.items()}
    ap2 = params.get("ap2")
    discovery.ap2_required = frozenset(
        str(entry.get("tenant", ""))
        for entry in (ap2 if isinstance(ap2, list) else [])
        if isinstance(entry, dict) and entry.get("required") is True
    )


def _request_text(card: dict[str, JSON]) -> str | None:
    skills = card.get("skills")
    first = skills[0] if isinstance(skills, list) and skills and isinstance(skills[0], dict) else {}
    examples = first.get("examples")
    if isinstance(examples, list) and examples and isinstance(examples[0], str) and examples[0].strip():
        return examples[0][:2000]
    return None


def tenant_card_urls(interface_urls: list[str]) -> list[str]:
    """Where a tenant's own 0.3 card may be: the well-known path under each base of its interfaces' URLs.

    The bases are the path prefixes of the URLs' common prefix, nearest first, the bare origin excluded
    (that is the default tenant's card). URLs on different origins share no base of the tenant's own.
    """
    parts = [urlsplit(url) for url in interface_urls]
    if not parts or len({(p.scheme, p.netloc) for p in parts}) != 1:
        return []
    paths = [[s for s in p.path.split("/") if s] for p in parts]
    common: list[str] = []
    for segments in zip(*paths, strict=False):
        if len(set(segments)) != 1:
            break
        common.append(segments[0])
    origin = (parts[0].scheme, parts[0].netloc)
    return [
        urlunsplit((*origin, "/" + "/".join(common[:depth]) + CARD_PATH, "", ""))
        for depth in range(len(common), 0, -1)
    ]


async def _tenant_card(http: UntrustedHttp, discovery: Discovery, tenant: str) -> None:
    urls = [i.url for i in discovery.interfaces if i.version == "0.3" and i.tenant == tenant]
    reading = CardReading("0.3", problem="no base of the tenant's 0.3 interface URLs is its own")
    for url in tenant_card_urls(urls):
        reading = await _read(http, url, "0.3")
        if reading.card is not None:
            break
    discovery.tenant_cards[tenant] = reading
    if reading.card is None:
        return
    declaration = reading.declaration(EXTENSION_URI_V02)
    params = declaration.get("params") if declaration is not None else None
    pay_to = params.get("payTo") if isinstance(params, dict) else None
    listed: set[tuple[str, str]] = set()
    for payee in pay_to if isinstance(pay_to, list) else []:
        address = _address(payee.get("address")) if isinstance(payee, dict) else None
        if address is not None and isinstance(payee.get("network"), str):
            listed.add((payee["network"], address))
    discovery.tenant_payees[tenant] = frozenset(listed)
    _read_ap2_v02(discovery, params, tenant)
    # Interfaces at URLs the 1.0 card lists already (for any tenant) are not the tenant's to add; the
    # card checks fail a tenant card naming another tenant's.
    known = {(i.url, i.binding) for i in discovery.interfaces if i.version == "0.3"}
    for interface in interfaces_0_3(reading.card, tenant):
        if (interface.url, interface.binding) not in known:
            discovery.interfaces.append(replace(interface, own_card_only=True))


async def discover(http: UntrustedHttp, url: str) -> Discovery:
    """Fetch the card of the merchant at ``url`` (a card URL or a base URL) and read what to test.

    Never raises for anything the merchant sends: a card that cannot be read leaves the discovery without
    interfaces and the reason in its readings.
    """
    card_url = card_url_of(url)
    readings = {version: await _read(http, card_url, version) for version in _READINGS}
    discovery = Discovery(card_url, readings)
    card_1_0 = readings["1.0"].card or readings[""].card
    if card_1_0 is not None:
        discovery.interfaces = interfaces_of(card_1_0)
        declaration = readings["1.0"].declaration(EXTENSION_URI) or readings[""].declaration(EXTENSION_URI)
        if declaration is not None:
            _read_params(discovery, declaration.get("params"))
        discovery.request_text = _request_text(card_1_0) or discovery.request_text
    card_0_3 = readings["0.3"].card
    if card_0_3 is not None and not any(i.version == "0.3" for i in discovery.interfaces):
        if card_0_3.get("capabilities") and readings["0.3"].declaration(EXTENSION_URI_V02) is not None:
            discovery.interfaces += interfaces_0_3(card_0_3)
    for reading in (readings["0.3"], readings[""]):
        declaration = reading.declaration(EXTENSION_URI_V02)
        _read_ap2_v02(discovery, declaration.get("params") if declaration is not None else None, "")
    for tenant in dict.fromkeys(i.tenant for i in discovery.interfaces if i.version == "0.3" and i.tenant):
        await _tenant_card(http, discovery, tenant)
    return discovery


def _read_ap2_v02(discovery: Discovery, params: JSON, tenant: str) -> None:
    """Note the entries of a v0.2 declaration's ``params.ap2`` (on a tenant's own card, an entry without
    ``tenant`` is that tenant's); the first entry read for a tenant counts."""
    ap2 = params.get("ap2") if isinstance(params, dict) else None
    for entry in ap2 if isinstance(ap2, list) else []:
        if isinstance(entry, dict):
            named = entry.get("tenant", tenant)
            if isinstance(named, str) and named not in discovery.ap2_v02:
                own = {key: value for key, value in entry.items() if key != "tenant"}
                discovery.ap2_v02[named] = {**own, "tenant": named} if named else own
