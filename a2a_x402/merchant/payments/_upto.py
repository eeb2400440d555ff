"""Where a metered skill's `upto` payments are settled from: the facilitator's `/supported` kind, asked once.

An `upto` payer names the facilitator in its signed witness (`extra.facilitatorAddress` of the terms): only
that address may settle the payment. The merchant copies it from the facilitator's `/supported` kind for
(x402 v2, `upto`, its network), as the x402 SDKs' upto servers do, when it first offers metered terms, and
keeps it: one address for every offer of the process. A facilitator that lists no such kind (or cannot be
asked) gets no answer cached, so the next metered offer asks again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from eth_utils.address import is_hex_address, to_checksum_address

from a2a_x402.facilitator import ChainUnavailableError
from a2a_x402.facilitator.wire import SupportedResponse

__all__ = ["MeteringUnavailableError", "SupportedSource", "UptoFacilitator", "upto_address"]

logger = logging.getLogger(__name__)

SupportedSource = Callable[[], Awaitable[SupportedResponse]]
"""The facilitator's `/supported` answer, asked for (`HttpFacilitatorClient.supported`, or the in-process
`Facilitator.supported`)."""


class MeteringUnavailableError(RuntimeError):
    """Metered terms cannot be offered: the facilitator settles no `upto` payments on the network, or could
    not be asked."""

    code = "metering_unavailable"


class UptoFacilitator:
    """The address the facilitator settles `upto` payments on `network` from, asked of `supported` once."""

    def __init__(self, supported: SupportedSource | None, network: str) -> None:
        self._supported = supported
        self._network = network
        self._address: str | None = None

    async def address(self) -> str:
        """The `facilitatorAddress` metered terms carry (EIP-55).

        Raises:
            MeteringUnavailableError: the facilitator cannot be asked, or lists no `upto` kind with an
                address for the network.
        """
        if self._address is not None:
            return self._address
        if self._supported is None:
            raise MeteringUnavailableError("this merchant's facilitator cannot be asked what it supports")
        try:
            answer = await self._supported()
        except (ChainUnavailableError, ValueError) as exc:  # no connection; no /supported answer in its body
            logger.warning("metered terms: the facilitator's /supported could not be read: %s", exc)
            raise MeteringUnavailableError(
                "the facilitator could not be asked whether it settles upto"
            ) from None
        self._address = upto_address(answer, self._network)
        if self._address is None:
            raise MeteringUnavailableError(f"the facilitator settles no upto payments on {self._network}")
        return self._address


def upto_address(answer: SupportedResponse, network: str) -> str | None:
    """The `facilitatorAddress` (EIP-55) of the x402 v2 `upto` kind for `network` in a `/supported` `answer`;
    None when it lists none with an address."""
    for kind in answer.kinds:
        if (kind.x402_version, kind.scheme, kind.network) != (2, "upto", network):
            continue
        address = (kind.extra or {}).get("facilitatorAddress")
        if isinstance(address, str) and is_hex_address(address):
            return to_checksum_address(address)
    return None
