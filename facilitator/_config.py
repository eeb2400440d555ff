"""Facilitator settings, read from the environment (prefix `X402_`) and an optional `.env` file."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from storage import DEFAULT_DATABASE_URL

__all__ = ["FacilitatorSettings", "load_private_key", "load_private_keys"]

_HEX_KEY = re.compile(r"^(0x)?[0-9a-fA-F]{64}$")
_CAIP2_EVM = re.compile(r"^eip155:[1-9][0-9]{0,18}$")


def load_private_key(value: str) -> str:
    """A private key given as 0x-hex, or as the path of a file holding it."""
    value = value.strip()
    if not _HEX_KEY.match(value):
        path = Path(value).expanduser()
        if not path.is_file():
            raise ValueError("relayer key must be 32 bytes of hex or the path of a file holding them")
        value = path.read_text().strip()
        if not _HEX_KEY.match(value):
            raise ValueError(f"{path} does not hold a 32-byte hex private key")
    return value if value.startswith("0x") else "0x" + value


def load_private_keys(value: str) -> list[str]:
    """Private keys given comma-separated (each 0x-hex or a file path), or as the path of a file holding one
    key per line (blank lines and `#` comments skipped)."""
    value = value.strip()
    path = Path(value).expanduser()
    if "," not in value and not _HEX_KEY.match(value) and path.is_file():
        lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
        entries = [line for line in lines if line]
        if not entries or not all(_HEX_KEY.match(entry) for entry in entries):
            raise ValueError(f"{path} does not hold one 32-byte hex private key per line")
    else:
        entries = [entry for entry in (part.strip() for part in value.split(",")) if entry]
    if not entries:
        raise ValueError("X402_RELAYER_KEYS names no key")
    keys = [load_private_key(entry) for entry in entries]
    # One key twice would be one account leased twice: refused rather than quietly merged.
    if len({key.lower() for key in keys}) != len(keys):
        raise ValueError("X402_RELAYER_KEYS names one key twice")
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
    fee_bump_after_s: float = Field(
        default=12.0,
        ge=0.5,
        le=3600,
        description="a settlement unmined this long with maxFeePerGas below the base fee is replaced",
    )
    database_url: str = Field(default=DEFAULT_DATABASE_URL, description="SQLAlchemy URL of the claim store")
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
    receipt_poll_s: float = Field(default=0.003, gt=0, le=5)
    claim_lease_s: float = Field(
        default=60.0, gt=0, description="after this, a claim whose owner vanished may be retaken"
    )
    relayer_min_balance_wei: int = Field(
        default=10**15,
        ge=0,
        description="a relayer key holding less takes no new settlements, and fails `/readyz`",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=4022, ge=0, le=65535)

    @field_validator("network")
    @classmethod
    def _evm_network(cls, value: str) -> str:
        if not _CAIP2_EVM.match(value):
            raise ValueError("network must be a CAIP-2 EVM id like eip155:84532")
        return value

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
            raise ValueError(
                "X402_RELAYER_KEY is not set (nor X402_RELAYER_KEYS): the facilitator cannot settle without"
                " a relayer key"
            )
        return keys
