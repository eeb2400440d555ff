"""Agents charging agents over A2A 1.0 with x402 payments settled on EVM chains.

Everything the distribution installs lives under this one namespace:

- `a2a_x402.extension`: the extension's wire contract (URIs, payment states, error codes, metadata).
- `a2a_x402.merchant`: the payment layer around any a2a-sdk `AgentExecutor`, and the reference merchant.
- `a2a_x402.payer`: the paying client.
- `a2a_x402.facilitator`: verification and settlement on any EVM node, in process or over HTTP.
- `a2a_x402.conformance`: the conformance kit that judges any merchant as a client sees it.

The names most users need first are here too, imported on first use (``import a2a_x402`` stays cheap):
``paid_app`` and ``MerchantSettings`` to charge for an agent, ``Payer`` and ``PaymentPolicy`` to pay one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from .merchant import MerchantSettings, paid_app
    from .payer import Payer, PaymentPolicy

__all__ = ["MerchantSettings", "Payer", "PaymentPolicy", "paid_app"]

_EXPORTS = {"merchant": ("MerchantSettings", "paid_app"), "payer": ("Payer", "PaymentPolicy")}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
