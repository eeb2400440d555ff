"""CAIP-2 eip155 ids and x402 v1 network names."""

from __future__ import annotations

import pytest
from x402.mechanisms.evm.v1.constants import V1_NETWORK_CHAIN_IDS as SDK_V1_NETWORK_CHAIN_IDS

from a2a_x402.facilitator.wire import (
    MAX_CHAIN_ID,
    V1_NETWORK_CHAIN_IDS,
    PaymentPayloadV1,
    PaymentRequirements,
    Reason,
    WireError,
    caip2_from_chain_id,
    chain_id_from_caip2,
    chain_id_from_v1_network,
    v1_network_from_chain_id,
)

from . import documents as docs


@pytest.mark.parametrize(
    ("network", "chain_id"),
    [("eip155:1", 1), ("eip155:8453", 8453), (f"eip155:{MAX_CHAIN_ID}", MAX_CHAIN_ID)],
)
def test_caip2_round_trip(network: str, chain_id: int) -> None:
    assert chain_id_from_caip2(network) == chain_id
    assert caip2_from_chain_id(chain_id) == network


@pytest.mark.parametrize(
    "bad",
    [
        "eip155:0",
        "eip155:08453",
        "eip155:",
        "eip155:-1",
        "eip155:84 53",
        "EIP155:8453",
        "base",
        "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
        "eip155:8453 ",
        f"eip155:{MAX_CHAIN_ID + 1}",
        "eip155:" + "9" * 70,
    ],
)
def test_invalid_caip2_is_refused(bad: str) -> None:
    with pytest.raises(WireError) as caught:
        chain_id_from_caip2(bad)
    assert caught.value.reason is Reason.INVALID_NETWORK
    assert caught.value.path == "network"


def test_requirements_network_errors_name_the_field() -> None:
    with pytest.raises(WireError) as caught:
        PaymentRequirements.from_wire(docs.requirements_v2() | {"network": "eip155:08453"})
    assert caught.value.message == (
        "network: expected a CAIP-2 EVM network eip155:<chainId> (decimal chain id, no leading zeros)"
    )
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS


@pytest.mark.parametrize("bad", [0, -1, MAX_CHAIN_ID + 1, True])
def test_caip2_from_chain_id_refuses_out_of_range(bad: int) -> None:
    with pytest.raises(WireError, match="chain id out of range"):
        caip2_from_chain_id(bad)


def test_v1_names_are_the_sdk_names() -> None:
    assert dict(V1_NETWORK_CHAIN_IDS) == SDK_V1_NETWORK_CHAIN_IDS


@pytest.mark.parametrize(
    ("name", "chain_id"),
    [
        ("base", 8453),
        ("base-sepolia", 84532),
        ("ethereum", 1),
        ("polygon", 137),
        ("polygon-amoy", 80002),
        ("avalanche", 43114),
        ("avalanche-fuji", 43113),
        ("sei-testnet", 1328),
        ("skale-base-sepolia", 1444673419),
    ],
)
def test_v1_names_map_both_ways(name: str, chain_id: int) -> None:
    assert chain_id_from_v1_network(name) == chain_id
    assert v1_network_from_chain_id(chain_id) == name


def test_v1_names_and_chain_ids_are_one_to_one() -> None:
    assert len(set(V1_NETWORK_CHAIN_IDS.values())) == len(V1_NETWORK_CHAIN_IDS)
    for name, chain_id in V1_NETWORK_CHAIN_IDS.items():
        assert v1_network_from_chain_id(chain_id) == name


def test_v1_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        V1_NETWORK_CHAIN_IDS["anvil"] = 31337  # type: ignore[index]


@pytest.mark.parametrize("bad", ["Base", "base ", "eip155:8453", "anvil", ""])
def test_unknown_v1_name_is_refused(bad: str) -> None:
    with pytest.raises(WireError) as caught:
        chain_id_from_v1_network(bad)
    assert caught.value.reason is Reason.INVALID_NETWORK
    with pytest.raises(WireError, match="^network: unknown x402 v1 network name$"):
        PaymentPayloadV1.from_wire(docs.payment_payload_v1() | {"network": bad})


def test_chain_without_v1_name_is_refused() -> None:
    with pytest.raises(WireError, match="^network: chain 31337 has no x402 v1 network name$") as caught:
        v1_network_from_chain_id(31337)
    assert caught.value.reason is Reason.INVALID_NETWORK
