"""Resolving a merchant's Agent Card: fetch, verify, parse, and read the x402 terms it pins.

The card is fetched as bytes (size-capped), parsed with ``agentcard.parse_card_json`` (duplicate members and
non-JSON numbers refused), checked by a ``CardVerifier`` on that exact JSON (a protobuf
``AgentCard`` would drop members the signer may have signed, which is why the SDK's ``A2ACardResolver``,
whose verifier hook only sees the proto, is not used), and only then turned into the SDK's ``AgentCard``.
Without a verifier of the caller's, the card is checked under the ``warn`` policy (the library's default):
an unsigned or failing card is logged with the reason and resolution continues. Checking nothing takes an
explicit ``CardVerifier(policy=SignaturePolicy.OFF)``.

The x402 extension's declaration (``capabilities.extensions`` entry with ``EXTENSION_URI``) carries what the
payer pins its payments to::

    {"networks": ["eip155:84532"],
     "assets": [{"network": ..., "address": "0x...", "name": "USDC", "version": "2", "decimals": 6}],
     "payTo": [{"network": ..., "tenant": "", "address": "0x..."}]}

Addresses are returned EIP-55 checksummed; a mixed-case address with a wrong checksum is refused as a typo.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard, AgentInterface
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_1_0,
    VERSION_HEADER,
    TransportProtocol,
)
from eth_utils.address import is_checksum_address, is_hex_address, to_checksum_address
from google.protobuf.json_format import ParseError

from a2a_x402.agentcard import (
    MAX_CARD_BYTES,
    AgentCardError,
    CardUnsignedError,
    CardVerificationError,
    CardVerifier,
    JwksCache,
    VerificationResult,
    parse_card_json,
)
from a2a_x402.extension import EXTENSION_URI, ExtensionMetadataError, JsonValue, normalize_struct_value
from a2a_x402.observability import unreachable_reason

from ._errors import CardError, CardNotServedError, MerchantUnreachableError, UntrustedCardError

__all__ = [
    "Binding",
    "CardAsset",
    "CardPayee",
    "CardPaymentTerms",
    "ResolvedCard",
    "card_document_url",
    "resolve_card",
]


class Binding(StrEnum):
    """The A2A protocol binding the payer talks to the merchant with."""

    JSONRPC = "jsonrpc"
    HTTP_JSON = "http+json"

    @property
    def protocol(self) -> str:
        """The binding's name in ``AgentInterface.protocolBinding``."""
        return (
            TransportProtocol.JSONRPC.value if self is Binding.JSONRPC else TransportProtocol.HTTP_JSON.value
        )


@dataclass(frozen=True, slots=True)
class CardAsset:
    """A token the card says it accepts; ``name``/``version`` are its EIP-712 domain when given."""

    network: str
    address: str
    name: str | None = None
    version: str | None = None
    decimals: int | None = None


@dataclass(frozen=True, slots=True)
class CardPayee:
    """An address the card says a tenant is paid at on a network."""

    network: str
    tenant: str
    address: str


@dataclass(frozen=True, slots=True)
class CardPaymentTerms:
    """The x402 extension parameters of a card: what a payment may use and whom it may pay."""

    networks: frozenset[str]
    assets: tuple[CardAsset, ...]
    pay_to: tuple[CardPayee, ...]

    def asset(self, network: str, address: str) -> CardAsset | None:
        """The listed asset at ``address`` on ``network``, or ``None``."""
        return next((a for a in self.assets if a.network == network and a.address == address), None)

    def payees(self, network: str, tenant: str) -> frozenset[str]:
        """The checksummed addresses ``tenant`` is paid at on ``network``."""
        return frozenset(p.address for p in self.pay_to if p.network == network and p.tenant == tenant)


@dataclass(frozen=True, slots=True)
class ResolvedCard:
    """A fetched, parsed and checked Agent Card with its x402 terms.

    Attributes:
        url: where the card was fetched.
        card: the SDK's ``AgentCard``.
        card_json: the card exactly as served (parsed JSON).
        terms: the x402 extension's parameters.
        verification: the verifier's result (``skipped`` under the ``off`` policy).
    """

    url: str
    card: AgentCard
    card_json: Mapping[str, Any]
    terms: CardPaymentTerms
    verification: VerificationResult

    def interface(self, binding: Binding, tenant: str) -> AgentInterface:
        """The A2A 1.x interface for ``binding`` and ``tenant``.

        Raises:
            CardError: the card lists no such interface.
        """
        for interface in self.card.supported_interfaces:
            if (
                interface.protocol_binding == binding.protocol
                and interface.tenant == tenant
                and interface.protocol_version.split(".")[0] == "1"
            ):
                return interface
        listed = ", ".join(
            f"{i.protocol_binding} v{i.protocol_version or '?'} tenant {i.tenant!r}"
            for i in self.card.supported_interfaces
        )
        raise CardError(
            f"the card lists no A2A 1.x {binding.protocol} interface for tenant {tenant!r} "
            f"(it lists: {listed})"
        )

    def narrowed_to(self, interface: AgentInterface) -> AgentCard:
        """A copy of the card whose only interface is ``interface``, so the SDK's client factory uses it."""
        narrowed = AgentCard()
        narrowed.CopyFrom(self.card)
        del narrowed.supported_interfaces[:]
        narrowed.supported_interfaces.append(interface)
        return narrowed


async def resolve_card(
    http: httpx.AsyncClient,
    url: str,
    *,
    verifier: CardVerifier | None = None,
    jwks: JwksCache | None = None,
    timeout_s: float = 10.0,
) -> ResolvedCard:
    """Fetch the Agent Card at ``url`` and read its x402 terms.

    Args:
        http: the client to fetch with.
        url: the card's URL, or the agent's origin (then ``/.well-known/agent-card.json`` is used).
        verifier: checks the card's signatures under its policy; ``None``: a ``warn`` verifier fetching keys
            from the card's ``jku`` (HTTPS only, on the card's own origin) through ``jwks``.
        jwks: the key cache of the default verifier; pass the same one to every resolution so that a JWK
            Set is fetched once per its TTL. ``None``: a cache of this call's own, on ``http``.
        timeout_s: the fetch's timeout.

    Returns:
        The resolved card.

    Raises:
        ValueError: both ``verifier`` and ``jwks`` are given (a verifier brings its own cache).
        CardError: the card cannot be fetched or parsed, or does not declare the x402 extension v0.3.
        UntrustedCardError: the verifier's policy is ``require`` and the card is unsigned or did not verify.
    """
    if verifier is not None and jwks is not None:
        raise ValueError("pass either a verifier or a jwks cache, not both: a verifier has its own cache")
    url = card_document_url(url)
    body = await _fetch(http, url, timeout_s)
    try:
        card_json = parse_card_json(body)
    except AgentCardError as exc:
        raise CardError(f"{url}: {exc}") from exc
    verifier = verifier or CardVerifier(jwks=jwks or JwksCache(http))
    verification = await _verify(verifier, card_json, url)
    try:
        # The SDK's parser rewrites legacy members in place; the served JSON must stay as it was.
        card = parse_agent_card(copy.deepcopy(card_json))
    except ParseError as exc:
        raise CardError(f"{url} is not an A2A Agent Card: {exc}") from exc
    return ResolvedCard(url, card, card_json, _payment_terms(card), verification)


def card_document_url(url: str) -> str:
    """The URL to fetch the card from: ``url`` itself, or its origin's well-known card path.

    Raises:
        CardError: ``url`` is not an absolute http(s) URL with a host (and a valid port, if any).
    """
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # out of range or not a number
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise CardError(f"the card URL must be an absolute http(s) URL, got {url!r}")
    if parts.path in ("", "/"):
        return urlunsplit(parts._replace(path=AGENT_CARD_WELL_KNOWN_PATH))
    return url


def _not_served(url: str, status: int) -> str:
    """Why the card's URL gave no card, and what to do about it."""
    if status == httpx.codes.NOT_FOUND:
        todo = f"check the URL (a merchant serves its card at {AGENT_CARD_WELL_KNOWN_PATH})"
    elif status >= httpx.codes.INTERNAL_SERVER_ERROR:
        todo = "the merchant failed; try again later"
    else:
        todo = "check the URL and that it is the merchant's"
    return f"the card's URL {url} answered HTTP {status}, not a card: {todo}"


async def _fetch(http: httpx.AsyncClient, url: str, timeout_s: float) -> bytes:
    """The card's bytes, refusing a body over ``MAX_CARD_BYTES`` without downloading all of it."""
    chunks: list[bytes] = []
    size = 0
    # A server with a card per protocol version answers a request without A2A-Version with its 0.3 card.
    headers = {"Accept": "application/json", VERSION_HEADER: PROTOCOL_VERSION_1_0}
    try:
        async with http.stream("GET", url, timeout=timeout_s, headers=headers) as reply:
            if reply.status_code != httpx.codes.OK:
                raise CardNotServedError(_not_served(url, reply.status_code))
            async for chunk in reply.aiter_bytes():
                size += len(chunk)
                if size > MAX_CARD_BYTES:
                    raise CardError(f"the card at {url} is larger than {MAX_CARD_BYTES} bytes")
                chunks.append(chunk)
    except httpx.TransportError as exc:  # no answer: nothing is wrong with a card nobody served
        raise MerchantUnreachableError(
            f"the merchant could not be reached at {url} ({unreachable_reason(exc)}): "
            "check the URL and that it runs"
        ) from exc
    except httpx.HTTPError as exc:
        raise CardError(f"the card at {url} could not be read: {exc}") from exc  # e.g. a bad encoding
    return b"".join(chunks)


async def _verify(verifier: CardVerifier, card_json: Mapping[str, Any], url: str) -> VerificationResult:
    try:
        return await verifier.verify(card_json, card_url=url)
    except (CardUnsignedError, CardVerificationError) as exc:
        raise UntrustedCardError(f"the card at {url} is not trusted: {exc}", verification=exc.result) from exc


def _payment_terms(card: AgentCard) -> CardPaymentTerms:
    declaration = next((e for e in card.capabilities.extensions if e.uri == EXTENSION_URI), None)
    if declaration is None:
        raise CardError(f"the card does not declare the x402 payment extension {EXTENSION_URI}")
    try:
        params = normalize_struct_value(declaration.params, "params")
    except ExtensionMetadataError as exc:
        raise CardError(f"the card's x402 extension params are unreadable: {exc}") from exc
    if not isinstance(params, dict):
        raise CardError("the card's x402 extension params must be an object")
    networks = _strings(params.get("networks"), "params.networks")
    assets = tuple(
        CardAsset(
            network=_string(item, "network", path),
            address=_address(item, "address", path),
            name=_optional_string(item, "name", path),
            version=_optional_string(item, "version", path),
            decimals=_decimals(item, path),
        )
        for path, item in _objects(params.get("assets"), "params.assets")
    )
    pay_to = tuple(
        CardPayee(
            network=_string(item, "network", path),
            tenant=_optional_string(item, "tenant", path) or "",
            address=_address(item, "address", path),
        )
        for path, item in _objects(params.get("payTo"), "params.payTo")
    )
    return CardPaymentTerms(frozenset(networks), assets, pay_to)


def _strings(value: JsonValue, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CardError(f"the card's x402 {path} must be a list of non-empty strings")
    return [str(v) for v in value]


def _objects(value: JsonValue, path: str) -> list[tuple[str, dict[str, JsonValue]]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise CardError(f"the card's x402 {path} must be a list of objects")
    return [(f"{path}[{index}]", item) for index, item in enumerate(value) if isinstance(item, dict)]


def _string(item: dict[str, JsonValue], key: str, path: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise CardError(f"the card's x402 {path}.{key} must be a non-empty string")
    return value


def _optional_string(item: dict[str, JsonValue], key: str, path: str) -> str | None:
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise CardError(f"the card's x402 {path}.{key} must be a string")
    return value


def _address(item: dict[str, JsonValue], key: str, path: str) -> str:
    value = _string(item, key, path)
    mixed_case = value[2:] not in (value[2:].lower(), value[2:].upper())
    if not is_hex_address(value) or (mixed_case and not is_checksum_address(value)):
        raise CardError(f"the card's x402 {path}.{key} is not a valid (checksummed) address: {value!r}")
    return str(to_checksum_address(value))


def _decimals(item: dict[str, JsonValue], path: str) -> int | None:
    value = item.get("decimals")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 77:
        raise CardError(f"the card's x402 {path}.decimals must be an integer from 0 to 77")
    return value
