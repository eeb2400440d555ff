"""Serving the Agent Card per protocol version, cacheable behind any HTTP cache.

`GET AGENT_CARD_PATH` negotiates the version like every A2A route and answers with that version's card
(`card.render_agent_card`). A request naming no version (no `A2A-Version`, or an empty one) is a 0.3
client or a 1.0 client that forgot the header: it gets one card for both
(`card.render_versionless_agent_card`), the 0.3 card plus the 1.0 interfaces and extension declarations,
served as 0.3. Each of the three documents has its own strong `ETag` (the SHA-256 of the exact bytes
served), `Cache-Control` and `Vary: A2A-Version`, so a shared cache (a CDN, a reverse proxy) keeps them
apart and never hands a 0.3 card to a 1.0 client. `If-None-Match` is answered with 304 carrying the same
validators. A version that cannot be negotiated gets VersionNotSupported as an HTTP+JSON error.

The card modifier is applied on every request to the version's card before it is rendered. A card
signer, when given, signs the rendered document (JWS over its canonical form, A2A §8.4) and the signed
document is what is served; it is signed once per distinct document, since ES256 signatures differ on
every signing and a card whose bytes changed on every request could never be cached or revalidated. The
signed documents are kept in a small LRU (`signed_cache_size`): a modifier that made every card distinct
would otherwise grow it without end.

`ExtendedAgentCards` serves each tenant's extended card through the SDK's extended-card hook (the request
handler's `extended_card_modifier`), so both 1.0 bindings answer `GetExtendedAgentCard` with it. Each card
is rendered and signed once, like the public ones, and handed to the SDK as the message parsed from the
signed JSON: the bindings write it back with `MessageToDict`, which gives the same members, so the served
card minus `signatures` is what was signed. The card is picked by the request's tenant (the tenant gate has
refused unknown ones), so a tenant is only ever answered with its own card. A2A 0.3 requests are refused:
the extended card is a 1.0 operation, and the compatibility layer would rewrite the card after signing.

`TenantCardEndpoints` serves each named tenant's own cards under its root (`card.build_tenant_agent_card`),
one `AgentCardEndpoint` per tenant, so they are negotiated, signed, tagged and revalidated exactly as the
root's; a tenant the deployment does not serve gets 404.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import AgentCard
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from google.protobuf.json_format import ParseDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_x402.merchant.payments import protocol_version

from .card import render_agent_card, render_versionless_agent_card
from .versions import ProtocolVersion, VersionNegotiator

__all__ = [
    "AgentCardEndpoint",
    "CardDocument",
    "CardModifier",
    "CardSigner",
    "ExtendedAgentCards",
    "TenantCardEndpoints",
]

CardModifier = Callable[[AgentCard], Awaitable[AgentCard]]
"""Called on every card request with the built card; returns the card to serve."""
CardSigner = Callable[[dict[str, Any]], dict[str, Any]]
"""Returns the card JSON to serve with its `signatures` set (e.g. `agentcard.sign_card` with the keys)."""
_MEDIA_TYPE = "application/json"
# Distinct signed documents kept: one per version for a static card, plus room for a modifier's variants.
_DEFAULT_SIGNED_CACHE_SIZE = 64


@dataclass(frozen=True, slots=True)
class CardDocument:
    """The card as served to one version's clients: its bytes and their strong entity tag."""

    version: ProtocolVersion
    body: bytes
    etag: str


def _if_none_match_hits(header: str, etag: str) -> bool:
    """Whether `If-None-Match` selects `etag` (RFC 9110 §13.1.2: weak comparison, `*` matches)."""
    candidates = [candidate.strip() for candidate in header.split(",")]
    return "*" in candidates or any(candidate.removeprefix("W/") == etag for candidate in candidates)


class AgentCardEndpoint:
    """The card route: the negotiated version's card, revalidated by its ETag.

    Raises:
        ValueError: `signed_cache_size` is below 1.
    """

    def __init__(
        self,
        cards: Mapping[ProtocolVersion, AgentCard],
        *,
        negotiator: VersionNegotiator,
        modifier: CardModifier | None,
        cache_control: str,
        signer: CardSigner | None = None,
        signed_cache_size: int = _DEFAULT_SIGNED_CACHE_SIZE,
    ) -> None:
        if signed_cache_size < 1:
            raise ValueError(f"signed_cache_size must be at least 1, got {signed_cache_size}")
        self._cards = dict(cards)
        self._signer = signer
        self._signed: OrderedDict[bytes, bytes] = OrderedDict()
        self._signed_cache_size = signed_cache_size
        self._negotiator = negotiator
        self._modifier = modifier
        self._cache_control = cache_control

    async def document(self, version: ProtocolVersion | None) -> CardDocument:
        """The exact document served to `version` clients now (the modifier applied).

        `None` is a request naming no version: the card for clients of both versions
        (`card.render_versionless_agent_card`), served as 0.3, the version such a request is served in.
        """
        if version is None:
            current = await self._card(ProtocolVersion.V1_0)
            body = render_versionless_agent_card(current, await self._card(ProtocolVersion.V0_3))
            version = ProtocolVersion.V0_3
        else:
            body = render_agent_card(await self._card(version), version)
        if self._signer is not None:
            body = self._sign(body)
        return CardDocument(version, body, f'"{hashlib.sha256(body).hexdigest()}"')

    async def _card(self, version: ProtocolVersion) -> AgentCard:
        card = self._cards[version]
        return card if self._modifier is None else await self._modifier(card)

    def _sign(self, body: bytes) -> bytes:
        signed = self._signed.get(body)
        if signed is not None:
            self._signed.move_to_end(body)
            return signed
        signer = self._signer
        if signer is None:
            raise RuntimeError("no card signer")
        signed = self._signed[body] = _signed_body(signer, body)
        if len(self._signed) > self._signed_cache_size:
            self._signed.popitem(last=False)
        return signed

    async def serve(self, request: Request) -> Response:
        """`GET AGENT_CARD_PATH`."""
        try:
            version = self._negotiator.version_of(request)
        except VersionNotSupportedError as exc:
            payload = build_rest_error_payload(exc)
            status = payload["error"]["code"]
            return JSONResponse(payload, status_code=status, headers={"Vary": VERSION_HEADER})
        versionless = version is ProtocolVersion.V0_3 and not self._negotiator.names_version(request)
        document = await self.document(None if versionless else version)
        headers = {
            "ETag": document.etag,
            "Cache-Control": self._cache_control,
            "Vary": VERSION_HEADER,
            VERSION_HEADER: version.value,
        }
        if_none_match = request.headers.get("if-none-match")
        if if_none_match and _if_none_match_hits(if_none_match, document.etag):
            return Response(status_code=304, headers=headers)
        return Response(document.body, media_type=_MEDIA_TYPE, headers=headers)


class TenantCardEndpoints:
    """The card route under a tenant's root: that tenant's `AgentCardEndpoint`, 404 for any other tenant.

    Args:
        endpoints: tenant id -> the endpoint serving that tenant's cards.
    """

    def __init__(self, endpoints: Mapping[str, AgentCardEndpoint]) -> None:
        self._endpoints = dict(endpoints)

    async def serve(self, request: Request) -> Response:
        """`GET TENANT_ROOT_PATH + AGENT_CARD_PATH`."""
        tenant = request.path_params["tenant"]
        endpoint = self._endpoints.get(tenant)
        if endpoint is None:
            error = {"code": 404, "status": "NOT_FOUND", "message": f"no tenant {tenant!r} is served here"}
            return JSONResponse({"error": error}, status_code=404)
        return await endpoint.serve(request)


class ExtendedAgentCards:
    """Each tenant's extended Agent Card, signed, for the SDK's `extended_card_modifier` hook.

    Args:
        cards: tenant id -> that tenant's extended card (`build_extended_agent_card`).
        signer: signs each card over exactly the JSON the bindings serve; `None` serves them unsigned.
    """

    def __init__(self, cards: Mapping[str, AgentCard], *, signer: CardSigner | None) -> None:
        self._cards: dict[str, AgentCard] = {}
        for tenant, card in cards.items():
            body = render_agent_card(card, ProtocolVersion.V1_0)
            if signer is not None:
                body = _signed_body(signer, body)
            self._cards[tenant] = ParseDict(json.loads(body), AgentCard())

    async def for_request(self, _card: AgentCard, context: ServerCallContext) -> AgentCard:
        """The requesting tenant's extended card (the SDK hook's signature; the SDK's own card is unused).

        Raises:
            UnsupportedOperationError: the request speaks A2A 0.3.
            ExtendedAgentCardNotConfiguredError: the tenant has no extended card.
        """
        if protocol_version(context) != ProtocolVersion.V1_0.value:
            raise UnsupportedOperationError(message="the extended Agent Card is served over A2A 1.0 only")
        card = self._cards.get(context.tenant)
        if card is None:
            raise ExtendedAgentCardNotConfiguredError(
                message=f"no extended Agent Card for tenant {context.tenant!r}"
            )
        served = AgentCard()
        # A layer may change what it is handed; the signed card itself must stay as signed.
        served.CopyFrom(card)
        return served


def _signed_body(signer: CardSigner, body: bytes) -> bytes:
    """`body` (a rendered card) with `signatures` set by `signer`, written compactly."""
    return json.dumps(signer(json.loads(body)), ensure_ascii=False, separators=(",", ":")).encode()
