"""Helpers shared by the tests that drive the service with the official x402 Python SDK."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

from eth_account import Account
from x402 import x402Client, x402ClientSync
from x402.mechanisms.evm import EthAccountSigner
from x402.mechanisms.evm.exact import register_exact_evm_client
from x402.schemas import PaymentRequirements

from a2a_x402.devchain import DevChain
from tests.fixtures.facilitator import PAY_TO

AMOUNT = 1_500_000
_Client = TypeVar("_Client", x402Client, x402ClientSync)


def signer_client(client: _Client, key: str) -> _Client:
    """`client` signing exact EVM payments with `key`."""
    registered = register_exact_evm_client(client, EthAccountSigner(Account.from_key(key)))
    # The SDK's spend controls only know the real USDC deployments, not the dev chain's token.
    registered.set_spend_controls(False)
    return registered


def sdk_requirements(chain: DevChain) -> PaymentRequirements:
    """The SDK's requirements for `AMOUNT` of the dev token to `PAY_TO`."""
    return PaymentRequirements(
        scheme="exact",
        network=chain.network,
        asset=chain.asset,
        amount=str(AMOUNT),
        pay_to=PAY_TO,
        max_timeout_seconds=120,
        extra={"name": chain.asset_name, "version": chain.asset_version},
    )


def dump(model: Any) -> dict[str, Any]:
    """An SDK model as the SDK's own HTTP clients send it."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def changed(document: Any, path: str, value: object) -> Any:
    """A copy of `document` with the field at dotted `path` set to `value` (removed when value is ...)."""
    result = copy.deepcopy(document)
    *parents, last = path.split(".")
    target = result
    for name in parents:
        target = target[name]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return result
