"""The merchant: any a2a-sdk `AgentExecutor` paid per request over the A2A x402 extension.

* ``paid_app``          -- the whole paid A2A app (1.0 and 0.3, every binding) around your executor
* ``MerchantSettings``  -- its settings, read from the ``X402_*`` environment by default
* ``PaidAppError``      -- ``paid_app`` called wrongly (skills, prices, ``skill_of``): nothing starts
* ``PaymentLayerMissingError`` -- a ``PaymentExecutor`` served without the payment layer: use ``paid_app``
* ``usage_meter``       -- what a metered skill's work reports it used (``UsageMeter``; ``UsageError``)

The parts (``edge``, ``payments``, ``ledger``, ``webhooks``, ``dashboard``, ...) are packages of their own;
``app`` is the reference merchant that ``x402-merchant serve`` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562): the merchant's commands import this package
# and must not start the app's dependencies.
if TYPE_CHECKING:
    from .paid import PaidAppError, paid_app
    from .payments import PaymentLayerMissingError, UsageError, UsageMeter, usage_meter
    from .settings import MerchantSettings

__all__ = [
    "MerchantSettings",
    "PaidAppError",
    "PaymentLayerMissingError",
    "UsageError",
    "UsageMeter",
    "paid_app",
    "usage_meter",
]

_EXPORTS = {
    "paid": ("PaidAppError", "paid_app"),
    "payments": ("PaymentLayerMissingError", "UsageError", "UsageMeter", "usage_meter"),
    "settings": ("MerchantSettings",),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
