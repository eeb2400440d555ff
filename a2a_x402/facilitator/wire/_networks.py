"""Network identifiers: CAIP-2 `eip155:<chainId>` for x402 v2, legacy names for v1.

Only the EVM namespace is accepted: this project settles EIP-3009 transfers and nothing else.
A chain id is a decimal without leading zeros, between 1 and the EIP-2294 bound. The v1 names
are those of the x402 Python SDK 2.25 (`mechanisms/evm/v1/constants.py`); a chain without a v1
name (a local anvil chain, say) can only be used with x402 v2.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Annotated, Final

from pydantic import PlainValidator

from ._errors import WireError, json_type_name
from ._primitives import fail
from ._reasons import Reason

__all__ = [
    "MAX_CHAIN_ID",
    "V1_NETWORK_CHAIN_IDS",
    "Caip2Network",
    "V1Network",
    "caip2_from_chain_id",
    "caip2_problem",
    "chain_id_from_caip2",
    "chain_id_from_v1_network",
    "v1_network_from_chain_id",
    "v1_network_problem",
]

# EIP-2294: the largest chain id that keeps EIP-155 `v` values within uint64.
MAX_CHAIN_ID: Final = (2**64 - 1) // 2 - 36
_MAX_NETWORK_CHARS: Final = 64
_EIP155 = re.compile(r"eip155:([1-9][0-9]{0,18})")

V1_NETWORK_CHAIN_IDS: Final = MappingProxyType(
    {
        "abstract": 2741,
        "abstract-testnet": 11124,
        "avalanche": 43114,
        "avalanche-fuji": 43113,
        "base": 8453,
        "base-sepolia": 84532,
        "celo": 42220,
        "educhain": 656476,
        "ethereum": 1,
        "flare": 14,
        "iotex": 4689,
        "megaeth": 4326,
        "monad": 143,
        "monad-testnet": 10143,
        "peaq": 3338,
        "polygon": 137,
        "polygon-amoy": 80002,
        "sei": 1329,
        "sei-testnet": 1328,
        "skale-base-sepolia": 1444673419,
        "stable": 988,
        "stable-testnet": 2201,
        "story": 1513,
    }
)
_V1_NAMES_BY_CHAIN_ID: Final = MappingProxyType({cid: name for name, cid in V1_NETWORK_CHAIN_IDS.items()})


def _chain_id_or_problem(network: str) -> int | str:
    if len(network) > _MAX_NETWORK_CHARS:
        return f"too long (at most {_MAX_NETWORK_CHARS} characters)"
    match = _EIP155.fullmatch(network)
    if match is None:
        return "expected a CAIP-2 EVM network eip155:<chainId> (decimal chain id, no leading zeros)"
    chain_id = int(match.group(1))
    if chain_id > MAX_CHAIN_ID:
        return f"chain id out of range (at most {MAX_CHAIN_ID})"
    return chain_id


def caip2_problem(network: str) -> str | None:
    """Say what is wrong with a CAIP-2 network string, or None when it is a valid eip155 id."""
    result = _chain_id_or_problem(network)
    return result if isinstance(result, str) else None


def v1_network_problem(name: str) -> str | None:
    """Say what is wrong with an x402 v1 network name, or None when it is a known one."""
    if name in V1_NETWORK_CHAIN_IDS:
        return None
    return "unknown x402 v1 network name"


def chain_id_from_caip2(network: str) -> int:
    """Return the chain id of an `eip155:<chainId>` network.

    Raises:
        WireError: `invalid_network` when `network` is not a valid eip155 CAIP-2 id.
    """
    result = _chain_id_or_problem(network)
    if isinstance(result, str):
        raise WireError(Reason.INVALID_NETWORK, result, "network")
    return result


def caip2_from_chain_id(chain_id: int) -> str:
    """Return the CAIP-2 id `eip155:<chainId>` of an EVM chain.

    Raises:
        WireError: `invalid_network` when the chain id is out of range.
    """
    if isinstance(chain_id, bool) or not 1 <= chain_id <= MAX_CHAIN_ID:
        raise WireError(Reason.INVALID_NETWORK, f"chain id out of range (1 to {MAX_CHAIN_ID})", "network")
    return f"eip155:{chain_id}"


def chain_id_from_v1_network(name: str) -> int:
    """Return the chain id of an x402 v1 network name such as `base-sepolia`.

    Raises:
        WireError: `invalid_network` when the name is not a known v1 name.
    """
    chain_id = V1_NETWORK_CHAIN_IDS.get(name)
    if chain_id is None:
        raise WireError(Reason.INVALID_NETWORK, "unknown x402 v1 network name", "network")
    return chain_id


def v1_network_from_chain_id(chain_id: int) -> str:
    """Return the x402 v1 name of a chain.

    Raises:
        WireError: `invalid_network` when the chain has no v1 name (it can be paid with v2 only).
    """
    name = _V1_NAMES_BY_CHAIN_ID.get(chain_id)
    if name is None:
        raise WireError(Reason.INVALID_NETWORK, f"chain {chain_id} has no x402 v1 network name", "network")
    return name


def _validate_caip2(value: object) -> str:
    if not isinstance(value, str):
        fail(f"expected a CAIP-2 network string eip155:<chainId>, got {json_type_name(value)}")
    problem = caip2_problem(value)
    if problem is not None:
        fail(problem)
    return str.__str__(value)


def _validate_v1_network(value: object) -> str:
    if not isinstance(value, str):
        fail(f"expected an x402 v1 network name string, got {json_type_name(value)}")
    problem = v1_network_problem(value)
    if problem is not None:
        fail(problem)
    return str.__str__(value)


Caip2Network = Annotated[str, PlainValidator(_validate_caip2, json_schema_input_type=str)]
V1Network = Annotated[str, PlainValidator(_validate_v1_network, json_schema_input_type=str)]
