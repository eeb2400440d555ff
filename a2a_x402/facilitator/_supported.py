"""The facilitator's `/supported` answer: the kinds it verifies and settles on its chain, and its signers.

As the x402 SDK facilitators list them: `exact` for x402 v2 and, where the chain has a legacy name, v1; and,
where the chain has Permit2 and the x402 upto proxy, `upto` for v2 with the `facilitatorAddress` a payer names
in its witness (one of the relayer keys, picked at random each time as the SDKs do, which spreads `upto`
settlements over the keys). Where the chain has Permit2 and the exact proxy, the v2 `exact` kind says it takes
both transfer methods (`extra.assetTransferMethods`, which the SDKs do not send: a payer's SDK reads nothing
there, and a client that cares finds it), and the `eip2612GasSponsoring` extension is listed.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Sequence
from typing import Any

from .wire import EIP2612_GAS_SPONSORING, SupportedKind, SupportedResponse, v1_network_from_chain_id

__all__ = ["supported_response"]


def supported_response(
    network: str, chain_id: int, relayers: Sequence[str], permit2_schemes: Collection[str]
) -> SupportedResponse:
    """The `/supported` answer of a facilitator on `network` (`chain_id`) settling from `relayers`, whose
    chain has the contracts to settle `permit2_schemes` through Permit2."""
    exact_extra: dict[str, Any] | None = (
        {"assetTransferMethods": ["eip3009", "permit2"]} if "exact" in permit2_schemes else None
    )
    kinds = [SupportedKind(x402_version=2, scheme="exact", network=network, extra=exact_extra)]
    if "upto" in permit2_schemes:
        extra = {"facilitatorAddress": secrets.choice(relayers)}
        kinds.append(SupportedKind(x402_version=2, scheme="upto", network=network, extra=extra))
    try:
        v1_network = v1_network_from_chain_id(chain_id)
    except ValueError:
        pass  # a chain without a legacy v1 name is offered to v2 clients only
    else:
        kinds.append(SupportedKind(x402_version=1, scheme="exact", network=v1_network))
    extensions = ["payment-identifier"]
    if permit2_schemes:
        extensions.append(EIP2612_GAS_SPONSORING)
    return SupportedResponse(
        kinds=tuple(kinds), extensions=tuple(extensions), signers={"eip155:*": tuple(relayers)}
    )
