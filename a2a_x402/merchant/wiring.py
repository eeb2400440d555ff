"""The parts every paid app is made of, read from `MerchantSettings`: tenants, the card's extension
declaration and signing keys, the bounds of a request, the authenticator and the reconciler.

`paid.paid_app` composes them; the commands (`check`, `reconcile`, `differences`) and the tests build single
parts from the same settings with them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import httpx
from a2a.types import AgentExtension
from google.protobuf.struct_pb2 import Struct
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.agentcard import (
    JwksCache,
    KeyStore,
    KeyStoreError,
    SigningKey,
    load_signing_key,
    load_signing_keys_from_env,
)
from a2a_x402.cli import ConfigError
from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02, Ap2Declaration
from a2a_x402.facilitator import FacilitatorClient, RpcClient
from a2a_x402.facilitator.wire import chain_id_from_caip2

from .ap2 import Ap2EvidenceStore
from .callers import Authenticator, CallerKeys, JwtIssuer, JwtVerifier, merge_issuers
from .differences import DifferenceStore
from .edge import RequestLimits, TenantTaskStore
from .ledger import Ledger
from .payments import OfferStore, PaymentRecovery, Pricing
from .reconciler import Reconciler, ReconcileReport
from .settings import MerchantSettings
from .tenants import DEFAULT_TENANT, Tenant, TenantRegistry

__all__ = [
    "build_authenticator",
    "build_reconciler",
    "card_signing_keys",
    "load_tenants",
    "payment_extension",
    "request_limits",
]


def payment_extension(
    pricing: Pricing,
    uri: str = EXTENSION_URI,
    *,
    required: bool = True,
    tenant: str | None = None,
    name_tenants: bool = True,
    ap2: Sequence[Ap2Declaration] = (),
) -> AgentExtension:
    """The card's declaration of the x402 extension version `uri`, with what is accepted and who is paid
    (every tenant's payTo, or with `tenant` only that tenant's, for its extended card and its own cards),
    and in v0.3 (`EXTENSION_URI`) the tenants of `ap2` that offer the embedded flow (`params.ap2`, §20.2), in
    v0.2 those of them offered its v0.2 form (`required`, §20.7).

    A named tenant's 0.3 card (`name_tenants=False`) names no tenant in its `payTo` entries: its interfaces
    carry none (on 0.3 the URL is the tenant), and a reader takes a missing `tenant` as the interface's.

    The default tenant's `payTo` entries carry no `tenant` member (clients read a missing one as `""`): the
    a2a-sdk's card verifier drops empty strings before checking a signature (docs/guides/agent-cards.md,
    "Empty fields"), so a signed `"tenant": ""` would make the SDK refuse the merchant's card.
    """
    ap2_entries = [
        entry.to_wire()
        for entry in ap2
        # On A2A 0.3 only the tenants offered the v0.2 form of the embedded flow (§20.7): the required ones.
        if (uri == EXTENSION_URI or (uri == EXTENSION_URI_V02 and entry.required))
        and (tenant is None or entry.tenant == tenant)
    ]
    params = Struct()
    params.update(
        {
            "networks": [pricing.asset.network],
            "assets": [
                {
                    "network": pricing.asset.network,
                    "address": pricing.asset.address,
                    "name": pricing.asset.name,
                    "version": pricing.asset.version,
                    "decimals": pricing.asset.decimals,
                }
            ],
            "payTo": [
                {"network": pricing.asset.network, "address": t.pay_to}
                | ({"tenant": t.id} if t.id and name_tenants else {})
                for t in pricing.tenants
                if tenant is None or t.id == tenant
            ],
        }
    )
    if ap2_entries:
        params.update({"ap2": ap2_entries})
    return AgentExtension(
        uri=uri,
        description="Payments for skills with x402 (EIP-3009 transferWithAuthorization).",
        required=required,
        params=params,
    )


def card_signing_keys(settings: MerchantSettings) -> list[SigningKey]:
    """The Agent Card signing keys `settings` configure (none: cards are unsigned), read from disk.

    Keys come from `X402_CARD_KEYS_DIR` (a key store the `keys` commands manage), or else from
    `X402_CARD_SIGNING_KEY_FILE` (one PEM or JWK private key, e.g. a mounted secret), or else from
    `X402_CARD_SIGNING_KEYS` (PEM private keys, a private JWK or a JWK Set, e.g. from a secret manager).

    Raises:
        KeyStoreError: the key directory holds no active key, or a key file in it is unreadable.
        KeyLoadError: the key file or `X402_CARD_SIGNING_KEYS` holds no usable key.
    """
    if settings.card_keys_dir is not None:
        store = KeyStore(settings.card_keys_dir)
        keys = store.signing_keys()
        if not keys:
            # A configured directory without a key must not quietly serve an unsigned card.
            raise KeyStoreError(
                f"no active signing key in {store.directory}: run `x402-merchant keys generate`"
            )
        return keys
    if settings.card_signing_key_file is not None:
        return [load_signing_key(settings.card_signing_key_file)]
    if settings.card_signing_keys is not None:
        return load_signing_keys_from_env(
            "X402_CARD_SIGNING_KEYS",
            environ={"X402_CARD_SIGNING_KEYS": settings.card_signing_keys.get_secret_value()},
        )
    return []


def request_limits(settings: MerchantSettings) -> RequestLimits:
    """The bounds of one request on every binding, from `settings` (`X402_MAX_*`, `X402_*_TIMEOUT_S`), and of
    the gRPC connections carrying them (`X402_GRPC_MAX_*`)."""
    return RequestLimits(
        max_body_bytes=settings.max_body_bytes,
        max_parts=settings.max_parts,
        max_metadata_bytes=settings.max_metadata_bytes,
        max_metadata_depth=settings.max_metadata_depth,
        max_header_count=settings.max_header_count,
        max_header_bytes=settings.max_header_bytes,
        header_timeout_s=settings.header_timeout_s,
        body_timeout_s=settings.body_timeout_s,
        grpc_max_concurrent_streams=settings.grpc_max_concurrent_streams,
        grpc_max_connection_idle_s=settings.grpc_max_connection_idle_s,
        grpc_max_connection_age_s=settings.grpc_max_connection_age_s,
        grpc_max_connection_age_grace_s=settings.grpc_max_connection_age_grace_s,
    )


def load_tenants(settings: MerchantSettings) -> TenantRegistry:
    """The tenants `settings` name: its tenants file (read from disk), or only the default tenant;
    `X402_API_TOKEN` is the default tenant's API token either way, and `X402_ANONYMOUS_CALLERS=false` closes
    the default tenant to callers without credentials either way.

    Raises:
        TenantConfigError: the tenants file is unreadable or invalid.
        cli.ConfigError: `X402_API_TOKEN` is set, but the file has no default tenant or gives it a token too.
    """
    token = settings.api_token.get_secret_value() if settings.api_token is not None else None
    if not settings.tenants_file:
        own_default = Tenant(
            id=DEFAULT_TENANT,
            pay_to=settings.pay_to or "",
            price=settings.price,
            api_token=token,
            anonymous_callers=settings.anonymous_callers,
        )
        return TenantRegistry([own_default])
    registry = TenantRegistry.from_toml(settings.tenants_file)
    if not settings.anonymous_callers:
        registry = TenantRegistry(
            dataclasses.replace(tenant, anonymous_callers=False) if tenant.id == DEFAULT_TENANT else tenant
            for tenant in registry
        )
    if token is None:
        return registry
    default = registry.get(DEFAULT_TENANT)
    if default is None:
        raise ConfigError(
            f"is the default tenant's token, but {settings.tenants_file} declares no [default] tenant: "
            "add one, or unset X402_API_TOKEN",
            variable="X402_API_TOKEN",
        )
    if default.api_token is not None:
        raise ConfigError(
            f"is set and {settings.tenants_file} gives the [default] tenant an api_token too: keep one",
            variable="X402_API_TOKEN",
        )
    return TenantRegistry(
        dataclasses.replace(tenant, api_token=token) if tenant.id == DEFAULT_TENANT else tenant
        for tenant in registry
    )


def build_authenticator(
    settings: MerchantSettings,
    engine: AsyncEngine,
    http: httpx.AsyncClient,
    tenants: TenantRegistry | None = None,
) -> Authenticator:
    """The merchant's authenticator: the API keys in `engine`'s `callers` table, the bearer JWTs of the
    `X402_JWT_*` issuer at every tenant, and those of each tenant's own `jwt_issuers` (tenants file) at
    that tenant only (keys fetched with `http`; plain http only on loopback)."""
    issuers: list[JwtIssuer] = []
    if settings.jwt_issuer and settings.jwt_audience and settings.jwt_jwks_url:
        issuers.append(
            JwtIssuer(
                issuer=settings.jwt_issuer, audience=settings.jwt_audience, jwks_url=settings.jwt_jwks_url
            )
        )
    for tenant in tenants or ():
        issuers.extend(
            JwtIssuer(
                issuer=own.issuer,
                audience=own.audience,
                jwks_url=own.jwks_url,
                tenants=frozenset({tenant.id}),
            )
            for own in tenant.jwt_issuers
        )
    # One cache per transport rule; both key their sets by URL, so tenants sharing an issuer share its keys.
    secure, insecure = JwksCache(http), JwksCache(http, allow_insecure_localhost=True)
    verifiers = [
        # plain http is refused unless on loopback (check_jku)
        JwtVerifier(issuer, insecure if urlsplit(issuer.jwks_url).scheme == "http" else secure)
        for issuer in merge_issuers(issuers)
    ]
    return Authenticator(CallerKeys(engine), verifiers)


def build_reconciler(
    settings: MerchantSettings,
    *,
    engine: AsyncEngine,
    facilitator: FacilitatorClient,
    offers: OfferStore,
    ledger: Ledger,
    tenants: TenantRegistry | None = None,
    on_report: Callable[[ReconcileReport], None] | None = None,
    tasks: TenantTaskStore | None = None,
    rpc: RpcClient | None = None,
) -> Reconciler:
    """The reconciler of a merchant on `engine`, reading the chain at `settings.rpc_url`; it watches the
    payTo of every tenant (`tenants`, or those `settings` name), and tells `on_report` what each pass did.
    `tasks` is the task store of the app it runs beside, so that the app's requests see its saves. `rpc`
    (default: a new client of `settings.rpc_url`) is the reconciler's to close."""
    if rpc is None:
        rpc = RpcClient(settings.rpc_url)
    if tenants is None:
        tenants = load_tenants(settings)
    recovery = PaymentRecovery(
        offers=offers,
        facilitator=facilitator,
        ledger=ledger,
        chain=rpc,
        tasks=tasks if tasks is not None else TenantTaskStore(engine, on_final=offers.told_in),
        stale_after_s=settings.reconcile_stale_after_s,
        settle_timeout_s=settings.settle_timeout_s,
        tenants=tenants,
        # The receipts of the rounds it ends join their evidence, also when the command runs it alone.
        evidence=Ap2EvidenceStore(engine, days=settings.ap2_evidence_days),
    )
    return Reconciler(
        facilitator=facilitator,
        recovery=recovery,
        offers=offers,
        ledger=ledger,
        rpc=rpc,
        confirmations=settings.confirmations,
        asset=settings.asset,
        chain_id=chain_id_from_caip2(settings.network),
        pay_tos=[tenant.pay_to for tenant in tenants],
        lookback_blocks=settings.reconcile_lookback_blocks,
        on_report=on_report,
        differences=DifferenceStore(engine),
    )
