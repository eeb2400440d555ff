"""The paying side: sign x402 payments and pay A2A merchants that use the x402 extension."""

from __future__ import annotations

from ._signing import sign_payment

__all__ = ["sign_payment"]
