"""Merchant settings, from the environment (prefix `X402_`) and an optional `.env` file."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from a2a_x402.facilitator import FacilitatorSettings, erc6492_factories, evm_network, http_url
from a2a_x402.storage import DEFAULT_DATABASE_URL

from ._explorer_setting import explorer_entries
from ._tenant_rules import address_problems, secret_problems

__all__ = ["MerchantSettings"]


class MerchantSettings(BaseSettings):
    """Everything `x402-merchant serve` needs (each variable: docs/reference/settings.md)."""

    model_config = SettingsConfigDict(env_prefix="X402_", env_file=".env", extra="ignore")

    database_url: str = Field(DEFAULT_DATABASE_URL, description="ledger, tasks, offers and outbox database")
    rpc_url: str = Field("http://127.0.0.1:8545", description="JSON-RPC endpoint (in-process facilitator)")
    network: str = Field("eip155:84532", description="CAIP-2 id of the chain payments are made on")
    asset: str = Field(..., description="the token contract's address (EIP-3009, or any ERC-20 via Permit2)")
    asset_transfer_method: Literal["eip3009", "permit2", "auto"] = Field(
        "auto",
        description="how payments move the token: its EIP-3009, or Permit2; auto asks the token at start-up",
    )
    asset_name: str = Field("USDC", description="the token's EIP-712 domain name")
    asset_version: str = Field("2", description="the token's EIP-712 domain version")
    asset_decimals: int = Field(6, ge=0, le=36)
    relayer_key: SecretStr | None = Field(
        None, description="relayer key (hex or file) for the in-process facilitator"
    )
    facilitator_url: str | None = Field(
        None, description="a remote x402 facilitator instead of the in-process one"
    )
    facilitator_api_key: SecretStr | None = Field(
        None, description="this merchant's API key at the remote facilitator (sent as a bearer token)"
    )
    confirmations: int = Field(1, ge=1, le=256)
    erc6492_factories: str = Field(
        "",
        description="wallet factories (comma-separated addresses) the in-process facilitator deploys "
        "counterfactual ERC-6492 wallets through; none when empty",
    )
    tenants_file: str | None = Field(
        None, description="TOML file of tenants (pay_to, prices, webhooks, api token)"
    )
    pay_to: str | None = Field(None, description="the default tenant's payee when no tenants file is given")
    api_token: SecretStr | None = Field(
        None, description="the default tenant's bearer token for its billing API (/tenants/default/...)"
    )
    price: int = Field(10_000, ge=0, description="the default tenant's price in atomic units")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    grpc_port: int | None = Field(
        None, ge=1, le=65535, description="serve A2A 1.0 over gRPC on this port of `host` too; off when unset"
    )
    public_url: str | None = Field(None, description="the URL clients reach the merchant at (for the card)")
    settle_timeout_s: float = Field(
        15.0, gt=0, le=300, description="how long a paid turn waits for settlement"
    )
    reconcile_interval_s: float = Field(
        30.0, gt=0, description="how often the service reconciles with the chain"
    )
    reconcile_lookback_blocks: int = Field(
        5_000,
        ge=1,
        description="how many recent blocks the reconciler reads for payments to the tenants' payTo",
    )
    reconcile_stale_after_s: float = Field(
        60.0,
        gt=0,
        description="a paid turn idle this long has lost its executor and is finished by the reconciler",
    )
    card_keys_dir: str | None = Field(
        None,
        description="directory of Agent Card signing keys (`x402-merchant keys generate`); unsigned without",
    )
    card_signing_key_file: str | None = Field(
        None,
        description="a file holding one Agent Card signing key (PEM or JWK), when there is no keys dir",
    )
    card_signing_keys: SecretStr | None = Field(
        None,
        description="Agent Card signing keys themselves (PEM, JWK or JWK Set), with no keys dir or key file",
    )
    relayer_min_balance_wei: int = Field(
        10**15, ge=0, description="below this balance the in-process facilitator's relayer is not ready"
    )
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, description="largest request body (and gRPC message) accepted, in bytes"
    )
    max_parts: int = Field(64, ge=1, description="most parts one A2A message may have")
    max_metadata_bytes: int = Field(
        64 * 1024, ge=1024, description="largest `metadata` object or data part of an A2A request, in bytes"
    )
    max_metadata_depth: int = Field(
        16, ge=2, le=100, description="deepest nesting of an A2A `metadata` object or data part"
    )
    max_header_count: int = Field(100, ge=10, description="most headers one HTTP request may have")
    max_header_bytes: int = Field(
        16 * 1024, ge=1024, description="largest request line and headers of one request (and gRPC metadata)"
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=300,
        description="a request's headers must arrive within this time (else 408, closed)",
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="a request's body must arrive within this time, else 408 and closed (gRPC: a call's "
        "request message, else DEADLINE_EXCEEDED)",
    )
    grpc_max_concurrent_streams: int = Field(
        100,
        ge=1,
        le=10_000,
        description="most gRPC calls one connection may have open at once (HTTP/2 streams); a client's "
        "further calls wait for one to end",
    )
    grpc_max_connection_idle_s: float = Field(
        300.0, gt=0, le=86_400, description="a gRPC connection with no call open this long is closed"
    )
    grpc_max_connection_age_s: float = Field(
        3600.0,
        gt=0,
        le=30 * 86_400,
        description="a gRPC connection is asked to close after this long (clients open another), so none is "
        "held for ever",
    )
    grpc_max_connection_age_grace_s: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="calls still open on a gRPC connection past its age get this long before it is closed",
    )
    max_unpaid_tasks: int = Field(
        100, ge=1, description="per caller and tenant, the most tasks awaiting payment at once"
    )
    max_unpaid_per_minute: int = Field(
        60, ge=1, description="per caller and tenant, the most priced tasks left unpaid within a minute"
    )
    unpaid_retention_s: int = Field(
        3600, ge=300, description="an unpaid (offered or rejected) task is purged this long after its offer"
    )
    unpaid_purge_interval_s: float = Field(
        60.0, gt=0, description="how often the service purges unpaid tasks past their retention"
    )
    ap2_evidence_days: int = Field(
        400,
        ge=1,
        description="days the AP2 evidence of a round paid with mandates (its checkout, mandates and "
        "receipts) is kept for disputes before it is purged; the mandates are personal data",
    )
    webhooks_allow_private: bool = Field(
        False, description="allow webhook endpoints on private/loopback hosts"
    )
    api_docs: bool = Field(
        False, description="serve the OpenAPI schema at /openapi.json (never the interactive /docs, /redoc)"
    )
    count_foreign_settlements: bool = Field(
        False,
        description="the in-process facilitator counts a transaction it did not send as a settlement; only "
        "safe when every deployment paying to the same payTo uses this database",
    )
    anonymous_callers: bool = Field(
        True, description="the default tenant serves callers without credentials (by task and context id)"
    )
    jwt_issuer: str | None = Field(None, description="the `iss` of the bearer JWTs accepted (OAuth 2 / OIDC)")
    jwt_audience: str | None = Field(None, description="the `aud` an accepted bearer JWT must contain")
    jwt_jwks_url: str | None = Field(None, description="the JWK Set URL of the JWT issuer's signing keys")
    explorers: str = Field(
        "",
        description="block explorers the dashboard links to, as comma-separated `eip155:<chain id>=<base "
        "URL>` pairs; each replaces its network's built-in one, and gives a dev chain links",
    )

    @field_validator("network")
    @classmethod
    def _evm_network(cls, value: str) -> str:
        return evm_network(value)

    @field_validator("rpc_url")
    @classmethod
    def _rpc_url(cls, value: str) -> str:
        return http_url(value)

    @field_validator("facilitator_url")
    @classmethod
    def _facilitator_url(cls, value: str | None) -> str | None:
        return http_url(value) if value else None

    # The card's interface URLs are built from it: a query or fragment there would end up in every one.
    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return http_url(value, path_only=True) if value else None

    @field_validator("erc6492_factories")
    @classmethod
    def _erc6492_factories(cls, value: str) -> str:
        return ",".join(erc6492_factories(value))

    @field_validator("asset", "pay_to")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        problems = [] if value is None else address_problems("address", value)
        if problems:
            raise ValueError(problems[0].removeprefix("address: "))
        return value

    @field_validator("explorers")
    @classmethod
    def _explorers(cls, value: str) -> str:
        return ",".join(f"{network}={url}" for network, url in explorer_entries(value).items())

    @field_validator("api_token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        problems = [] if value is None else secret_problems("token", value.get_secret_value())
        if problems:
            raise ValueError(problems[0].removeprefix("token: "))
        return value

    @model_validator(mode="after")
    def _tenants_or_pay_to(self) -> MerchantSettings:
        if self.tenants_file is None and self.pay_to is None:
            raise ValueError(
                "X402_PAY_TO is not set: set it to the default tenant's payee address, "
                "or set X402_TENANTS_FILE to a tenants file"
            )
        return self

    @field_validator("jwt_jwks_url")
    @classmethod
    def _jwks_url(cls, value: str | None) -> str | None:
        return http_url(value) if value else None

    @model_validator(mode="after")
    def _jwt_all_or_none(self) -> MerchantSettings:
        given = [self.jwt_issuer, self.jwt_audience, self.jwt_jwks_url]
        if any(given) and not all(given):
            raise ValueError(
                "X402_JWT_ISSUER, X402_JWT_AUDIENCE and X402_JWT_JWKS_URL go together: set all three or none"
            )
        return self

    @model_validator(mode="after")
    def _ports_differ(self) -> MerchantSettings:
        if self.grpc_port is not None and self.grpc_port == self.port:
            raise ValueError(f"X402_GRPC_PORT must differ from X402_PORT ({self.port})")
        return self

    @property
    def base_url(self) -> str:
        """The public base URL of the merchant."""
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    def explorer_urls(self) -> dict[str, str]:
        """`X402_EXPLORERS` as the explorer's base URL per CAIP-2 network."""
        return explorer_entries(self.explorers)

    def remote_facilitator_key(self) -> str | None:
        """The API key to present to the remote facilitator (`X402_FACILITATOR_API_KEY`), if any."""
        key = self.facilitator_api_key
        return None if key is None else key.get_secret_value()

    def facilitator_settings(self) -> FacilitatorSettings:
        """Settings for the in-process facilitator, sharing this database and chain."""
        return FacilitatorSettings(
            rpc_url=self.rpc_url,
            network=self.network,
            relayer_key=self.relayer_key,
            database_url=self.database_url,
            confirmations=self.confirmations,
            erc6492_factories=self.erc6492_factories,
            receipt_timeout_s=self.settle_timeout_s,
            count_foreign_settlements=self.count_foreign_settlements,
            relayer_min_balance_wei=self.relayer_min_balance_wei,
        )
