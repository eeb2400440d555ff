"""Facilitator settings, read from the environment (prefix `X402_`) and an optional `.env` file."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from a2a_x402.cli import ConfigError
from a2a_x402.storage import DEFAULT_DATABASE_URL

from ._asset_list import AssetEntry, asset_entries, format_asset_entries
from .wire import checksum_address

__all__ = [
    "FacilitatorSettings",
    "erc6492_factories",
    "evm_network",
    "http_url",
    "load_private_key",
    "load_private_keys",
]

_HEX_KEY = re.compile(r"^(0x)?[0-9a-fA-F]{64}$")
_CAIP2_EVM = re.compile(r"^eip155:[1-9][0-9]{0,18}$")
_HEX_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


def evm_network(value: str) -> str:
    """`value` when it is a CAIP-2 id of an EVM chain (`eip155:<chain id>`); raises ValueError otherwise."""
    if not _CAIP2_EVM.match(value):
        raise ValueError("must be a CAIP-2 EVM chain id such as eip155:84532 (Base Sepolia)")
    return value


def http_url(value: str, *, path_only: bool = False) -> str:
    """`value` when it is an absolute http(s) URL with a host (and, when `path_only`, no query or fragment);
    raises ValueError otherwise. The message never shows the value: a provider's URL may carry an API key."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port out of range or not a number raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "must be an absolute http:// or https:// URL with a host, such as https://host.example"
        )
    if path_only and (parts.query or parts.fragment):
        raise ValueError("must be an http(s) URL without a query or fragment")
    return value


def erc6492_factories(value: str) -> tuple[str, ...]:
    """The EIP-55 addresses of a comma-separated list of wallet factories, in order, each once.

    Blank entries are skipped, so an empty value lists none. An address all in lower or upper case carries
    no checksum; a mixed-case one claims one and must honour it. Raises ValueError naming the first entry
    that is not an address (by its position only when it has the shape of a private key, never shown).
    """
    factories: dict[str, None] = {}
    for position, entry in enumerate((part.strip() for part in value.split(",")), start=1):
        if not entry:
            continue
        if _HEX_KEY.match(entry):
            raise ValueError(f"entry {position} is 32 bytes of hex (a private key?), not a 20-byte address")
        if not _HEX_ADDRESS.match(entry):
            raise ValueError(
                f"{entry!r} is not an address: list wallet factories as 0x-prefixed 20-byte hex "
                "addresses, separated by commas"
            )
        address = checksum_address(entry)
        digits = entry[2:]
        if digits not in (digits.lower(), digits.upper()) and address != entry:
            raise ValueError(f"{entry} has a wrong EIP-55 checksum (expected {address})")
        factories[address] = None
    return tuple(factories)


def load_private_key(value: str) -> str:
    """A private key given as 0x-hex, or as the path of a file holding it."""
    value = value.strip()
    if not _HEX_KEY.match(value):
        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigError(
                "must be 32 bytes of hex or the path of a file holding them", variable="X402_RELAYER_KEY"
            )
        try:
            value = path.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"names {path}, which cannot be read: {exc}", variable="X402_RELAYER_KEY"
            ) from exc
        if not _HEX_KEY.match(value):
            raise ConfigError(
                f"names {path}, which does not hold a 32-byte hex private key", variable="X402_RELAYER_KEY"
            )
    return value if value.startswith("0x") else "0x" + value


def load_private_keys(value: str) -> list[str]:
    """Private keys given comma-separated (each 0x-hex or a file path), or as the path of a file holding one
    key per line (blank lines and `#` comments skipped)."""
    value = value.strip()
    path = Path(value).expanduser()
    if "," not in value and not _HEX_KEY.match(value) and path.is_file():
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"names {path}, which cannot be read: {exc}", variable="X402_RELAYER_KEYS"
            ) from exc
        entries = [entry for entry in (line.split("#", 1)[0].strip() for line in text.splitlines()) if entry]
        if not entries or not all(_HEX_KEY.match(entry) for entry in entries):
            raise ConfigError(
                f"names {path}, which does not hold one 32-byte hex private key per line",
                variable="X402_RELAYER_KEYS",
            )
    else:
        entries = [entry for entry in (part.strip() for part in value.split(",")) if entry]
    if not entries:
        raise ConfigError("names no key", variable="X402_RELAYER_KEYS")
    keys = [load_private_key(entry) for entry in entries]
    # One key twice would be one account leased twice: refused rather than quietly merged.
    if len({key.lower() for key in keys}) != len(keys):
        raise ConfigError("names one key twice", variable="X402_RELAYER_KEYS")
    return keys


class FacilitatorSettings(BaseSettings):
    """Everything the facilitator needs to verify and settle on one EVM chain."""

    model_config = SettingsConfigDict(env_prefix="X402_", env_file=".env", extra="ignore")

    rpc_url: str = Field(default="http://127.0.0.1:8545", description="JSON-RPC endpoint of the chain")
    network: str = Field(
        default="eip155:84532", description="CAIP-2 id of the chain; the node must report this chain id"
    )
    relayer_key: SecretStr | None = Field(
        default=None, description="relayer private key (hex) or a file path holding it"
    )
    relayer_keys: SecretStr | None = Field(
        default=None,
        description="relayer keys: comma-separated (hex or file paths), or a file of one key per line",
    )
    relayer_max_keys: int | None = Field(
        default=None,
        ge=1,
        description="take at most this many of the keys (their number over the replicas'); all when unset",
    )
    relayer_lease_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="a relayer key's lease in the database; renewed at a third of it, taken over after it",
    )
    relayer_stuck_after_s: float = Field(
        default=120.0,
        gt=0,
        description="a key whose oldest transaction is unmined this long takes no new work",
    )
    max_fee_per_gas: int | None = Field(
        default=None,
        gt=0,
        lt=2**63,
        description="ceiling of maxFeePerGas, for sends and fee-bumped replacements",
    )
    relayer_revive_after_s: float = Field(
        default=2.0,
        ge=0.5,
        le=3600,
        description="a key's next nonce unmined this long while later ones wait is sent again if the node "
        "no longer holds it, and replaced with bumped fees if it does",
    )
    fee_bump_after_s: float = Field(
        default=12.0,
        ge=0.5,
        le=3600,
        description="a settlement unmined this long with maxFeePerGas below the base fee is replaced",
    )
    # None by default: a factory is a contract the relayer would pay to call with calldata from a stranger.
    erc6492_factories: str = Field(
        default="",
        description="wallet factories (comma-separated addresses) through which counterfactual ERC-6492 "
        "wallets are deployed at settlement; none when empty: only deployed wallets' signatures are accepted",
    )
    assets: str = Field(
        default="",
        description="the tokens settled (comma-separated addresses, each optionally :name:version of its "
        "EIP-712 domain), for `check` to read their code, domain and decimals; none when empty",
    )
    database_url: str = Field(default=DEFAULT_DATABASE_URL, description="SQLAlchemy URL of the claim store")
    count_foreign_settlements: bool = Field(
        default=False,
        description="count a transaction this deployment did not send (the payer's, or a third party's) "
        "that used a presented authorization to pay the payTo as its settlement; only safe when every "
        "deployment paying to the same payTo shares this claim store (database)",
    )
    confirmations: int = Field(
        default=1, ge=1, le=256, description="blocks on top of (and including) the settlement's"
    )
    receipt_timeout_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="how long a settle waits for its receipt before answering pending",
    )
    rpc_timeout_s: float = Field(default=10.0, gt=0, le=120)
    validity_margin_s: int = Field(
        default=6, ge=0, le=600, description="validBefore must be at least this far ahead"
    )
    gas_limit_cap: int = Field(default=300_000, ge=21_000, le=10_000_000)
    receipt_poll_s: float = Field(
        default=0.003,
        gt=0,
        le=5,
        description="how often pending receipts are polled; the default suits a chain that mines on"
        " arrival (a dev chain), and up to 10 ms a lone settlement is also looked at again within about a"
        " millisecond: on a chain with block times, and a metered RPC provider, set it near the block time",
    )
    claim_lease_s: float = Field(
        default=60.0, gt=0, description="after this, a claim whose owner vanished may be retaken"
    )
    relayer_min_balance_wei: int = Field(
        default=10**15,
        ge=0,
        description="a relayer key holding less takes no new settlements, and fails `/readyz`",
    )
    revert_cooloff_s: float = Field(
        default=3600.0,
        ge=0,
        le=30 * 86400,
        description="a payer whose settlement reverted on chain is refused this long (0: never)",
    )
    revert_cooloff_code_payers: int = Field(
        default=3,
        ge=1,
        description="a wallet code is refused too once this many payers with it reverted within the cool-off",
    )
    relayer_revert_budget_wei: int | None = Field(
        default=10**16,
        gt=0,
        lt=2**256,
        description="wei a relayer key may spend on reverted settlements per hour; past it, it sends nothing "
        "new until older reverts age out (unset: no budget)",
    )
    facilitator_public: bool = Field(
        default=False,
        description="serve /verify and /settle to callers without an API key too (a public facilitator); "
        "by default only callers presenting a live key (`x402-facilitator keys create`) are served",
    )
    # The bounds of one HTTP request, named as the merchant's (X402_MAX_BODY_BYTES, ...) with the service's
    # name before them: one environment may configure both services, whose bodies differ a hundredfold.
    facilitator_max_body_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        le=16 * 1024 * 1024,
        description="largest request body, in bytes (a larger one is refused as a malformed request, unread)",
    )
    facilitator_body_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="a request's body must arrive within this time, else 408 and the connection closed",
    )
    facilitator_max_header_count: int = Field(
        default=100, ge=10, description="most headers one HTTP request may have (else 431, closed)"
    )
    facilitator_max_header_bytes: int = Field(
        default=16 * 1024,
        ge=1024,
        description="largest request line and headers of one request, in bytes (else 431, closed)",
    )
    facilitator_header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="a request's headers must arrive within this time, else 408 and the connection closed",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=4022, ge=0, le=65535)

    @field_validator("network")
    @classmethod
    def _evm_network(cls, value: str) -> str:
        return evm_network(value)

    @field_validator("rpc_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return http_url(value)

    @field_validator("erc6492_factories")
    @classmethod
    def _erc6492_factories(cls, value: str) -> str:
        return ",".join(erc6492_factories(value))

    @field_validator("assets")
    @classmethod
    def _assets(cls, value: str) -> str:
        return format_asset_entries(asset_entries(value))

    @property
    def asset_list(self) -> tuple[AssetEntry, ...]:
        """The tokens of `assets`, each with the EIP-712 domain listed for it, if any."""
        return asset_entries(self.assets)

    @property
    def erc6492_factory_addresses(self) -> tuple[str, ...]:
        """The checksummed addresses of `erc6492_factories`: the only contracts a settlement may call to
        deploy a payer's wallet."""
        return tuple(self.erc6492_factories.split(",")) if self.erc6492_factories else ()

    @property
    def chain_id(self) -> int:
        """The chain id named by `network`."""
        return int(self.network.split(":", 1)[1])

    def relayer_private_key(self) -> str:
        """The first relayer key, loaded from hex or from its file."""
        return self.relayer_private_keys()[0]

    def relayer_private_keys(self) -> list[str]:
        """Every relayer key: `X402_RELAYER_KEY` (a pool of one) and those of `X402_RELAYER_KEYS`."""
        keys = [] if self.relayer_key is None else [load_private_key(self.relayer_key.get_secret_value())]
        if self.relayer_keys is not None:
            keys += [
                key
                for key in load_private_keys(self.relayer_keys.get_secret_value())
                if key.lower() not in {known.lower() for known in keys}
            ]
        if not keys:
            raise ConfigError(
                "is not set (nor X402_RELAYER_KEYS): the facilitator cannot settle without a relayer key "
                "(hex, or a file holding it)",
                variable="X402_RELAYER_KEY",
            )
        return keys
