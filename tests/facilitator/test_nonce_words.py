"""Every node's wording of a nonce refusal is read right: too low (the key moved on) apart from too high."""

from __future__ import annotations

import pytest

from a2a_x402.facilitator._nonce_words import nonce_too_high, nonce_too_low

# The messages as each node sends them (from their sources), inside the prefixes clients and proxies add.
TOO_LOW = {
    "geth": "nonce too low: next nonce 49, tx nonce 48",
    "anvil": "nonce too low",
    "erigon": "nonce too low",
    "hardhat": "Nonce too low. Expected nonce to be 49 but got 48.",
    "hardhat-3": "Nonce too low. Expected nonce to be 49 but got 48. Note that transactions can't be queued "
    "when automining.",
    "ganache": "the tx doesn't have the correct nonce. account has nonce of: 49 tx has nonce of: 48",
    "ganache-vm-exception": "VM Exception while processing transaction: the tx doesn't have the correct "
    "nonce. account has nonce of: 17 tx has nonce of: 16",
    "nethermind": "OldNonce",
    "nethermind-detailed": "OldNonce, Current nonce: 49, nonce of rejected tx: 48",
    "besu": "Nonce too low",
    "besu-pool": "transaction nonce 48 below sender account nonce 49",
}
TOO_HIGH = {
    "geth": "nonce too high",
    "hardhat": "Nonce too high. Expected nonce to be 0 but got 3. Note that transactions can't be queued "
    "when automining.",
    "ganache": "the tx doesn't have the correct nonce. account has nonce of: 0 tx has nonce of: 10",
    "nethermind": "NonceGap, Future nonce. Expected nonce: 49",
    "nethermind-far": "NonceTooFarInFuture",
}
NEITHER = [
    "already known",
    "replacement transaction underpriced",
    "insufficient funds for gas * price + value",
    "execution reverted",
    "",
    "the tx doesn't have the correct nonce",  # no numbers: cannot tell which way
]


@pytest.mark.parametrize("message", TOO_LOW.values(), ids=TOO_LOW.keys())
def test_each_nodes_too_low_is_too_low(message: str) -> None:
    assert nonce_too_low(message)
    assert not nonce_too_high(message)


@pytest.mark.parametrize("message", TOO_HIGH.values(), ids=TOO_HIGH.keys())
def test_each_nodes_too_high_is_too_high(message: str) -> None:
    assert nonce_too_high(message)
    assert not nonce_too_low(message)


@pytest.mark.parametrize("message", NEITHER)
def test_other_refusals_are_neither(message: str) -> None:
    assert not nonce_too_low(message)
    assert not nonce_too_high(message)


def test_an_oversized_message_is_read_without_trouble() -> None:
    message = "x" * 1_000_000 + " account has nonce of: 9 tx has nonce of: 8"
    assert nonce_too_low(message)
