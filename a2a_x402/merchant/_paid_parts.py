"""The pieces of `paid_app` that read its settings once: the card (its settings, its signer and JWKS route),
the gRPC addresses, the secrets to redact, the line saying the merchant serves, and the facilitator's
`/supported`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from a2a.types import AgentSkill
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from a2a_x402.agentcard import JWKS_PATH, CardReading, jwks_url, sign_card
from a2a_x402.extension import EXTENSION_URI_V01, EXTENSION_URI_V02, Ap2Declaration
from a2a_x402.facilitator import Facilitator, HttpFacilitatorClient
from a2a_x402.facilitator.wire import SupportedResponse
from a2a_x402.observability import service_version, settings_secrets

from .edge import AgentCardSettings, CardSigner, grpc_listen_address
from .payments import Pricing
from .settings import MerchantSettings
from .tenants import TenantRegistry
from .webhooks import endpoint_configs
from .wiring import card_signing_keys, payment_extension

__all__ = ["card_settings", "card_signing", "grpc_addresses", "log_startup", "secrets_of"]

logger = logging.getLogger("a2a_x402.merchant.paid")  # the line of `paid_app`, whose module it speaks for


def card_settings(
    settings: MerchantSettings,
    *,
    name: str,
    description: str,
    version: str,
    skills: Sequence[AgentSkill],
    grpc_url: str | None,
    pricing: Pricing,
    ap2: Sequence[Ap2Declaration],
) -> AgentCardSettings:
    """The Agent Card's settings: the merchant's and each tenant's, on A2A 1.0 and 0.3."""
    return AgentCardSettings(
        name=name,
        description=description,
        version=version,
        base_url=settings.base_url,
        skills=list(skills),
        grpc_url=grpc_url,
        extensions=[payment_extension(pricing, ap2=ap2)],
        tenant_extensions=lambda tenant: [payment_extension(pricing, tenant=tenant, ap2=ap2)],
        # A2A 0.3 clients speak extension v0.2; v0.1 has the same wire form (accepted, not required).
        extensions_v0_3=[
            payment_extension(pricing, EXTENSION_URI_V02, ap2=ap2),
            payment_extension(pricing, EXTENSION_URI_V01, required=False),
        ],
        tenant_extensions_v0_3=lambda tenant: [
            payment_extension(
                pricing,
                uri,
                required=uri == EXTENSION_URI_V02,
                tenant=tenant,
                name_tenants=False,
                ap2=ap2,
            )
            for uri in (EXTENSION_URI_V02, EXTENSION_URI_V01)
        ],
    )


def card_signing(settings: MerchantSettings) -> tuple[CardSigner | None, list[BaseRoute]]:
    """The card signer and the JWKS route, when signing keys are configured (read once, at startup).

    Raises:
        KeyStoreError: the key directory holds no active key, or a key file in it is unreadable.
        KeyLoadError: the key file or `X402_CARD_SIGNING_KEYS` holds no usable key.
    """
    keys = card_signing_keys(settings)
    if not keys:
        return None, []
    jwks = {"keys": [key.public_jwk() for key in keys]}
    jku = jwks_url(settings.base_url)

    def sign(card: dict[str, Any]) -> dict[str, Any]:
        # Every reading: a 0.3 client's a2a-sdk reads a card differently from ours and from a 1.x client's.
        return sign_card(card, keys, jku=jku, readings=tuple(CardReading))

    async def serve_jwks(_request: Request) -> JSONResponse:
        return JSONResponse(jwks, headers={"Cache-Control": "public, max-age=300"})

    return sign, [Route(JWKS_PATH, serve_jwks, methods=["GET"])]


def grpc_addresses(settings: MerchantSettings) -> tuple[str | None, str | None]:
    """Where the gRPC binding listens (`X402_HOST`) and the address the card gives for it (the host of
    `X402_PUBLIC_URL` when set), both at `X402_GRPC_PORT`; (None, None) when gRPC is off."""
    if settings.grpc_port is None:
        return None, None
    public_host = urlsplit(settings.public_url).hostname if settings.public_url else None
    return (
        grpc_listen_address(settings.host, settings.grpc_port),
        grpc_listen_address(public_host or settings.host, settings.grpc_port),
    )


def secrets_of(settings: MerchantSettings, tenants: TenantRegistry) -> list[str]:
    """Every secret the merchant was configured with: its settings' and each tenant's token and webhook
    secrets."""
    found = settings_secrets(settings) + [config.secret for config in endpoint_configs(tenants)]
    for tenant in tenants:
        found += [tenant.api_token or "", tenant.webhook_secret or ""]
    return found


def log_startup(settings: MerchantSettings, tenants: TenantRegistry, *, signed: bool) -> None:
    """The line saying the merchant serves: where, version, facilitator mode, network, tenants, cards."""
    if settings.facilitator_url:
        # Only scheme, host and port: a URL's user info or query may hold credentials.
        parts = urlsplit(settings.facilitator_url)
        mode = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    else:
        mode = "in-process"
    count = len(list(tenants))
    address = f"{settings.host}:{settings.port}"
    logger.info(
        "merchant %s serving at http://%s on %s: facilitator %s, %d tenant%s, cards %s",
        service_version(),
        address,
        settings.network,
        mode,
        count,
        "" if count == 1 else "s",
        "signed" if signed else "unsigned",
        extra={
            "address": address,
            "version": service_version(),
            "facilitator": mode,
            "network": settings.network,
            "tenants": count,
            "cards_signed": signed,
        },
    )


async def supported_kinds(facilitator: Facilitator | HttpFacilitatorClient) -> SupportedResponse:
    """The facilitator's `/supported` answer (metered skills' terms read its `upto` kind): the in-process
    one answers from what its startup checks found, a remote one over HTTP."""
    if isinstance(facilitator, Facilitator):
        return facilitator.supported()
    return await facilitator.supported()
