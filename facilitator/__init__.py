"""Verify and settle x402 `exact` payments (EIP-3009 `transferWithAuthorization`) on an EVM chain.

In process::

    facilitator = await Facilitator.open(FacilitatorSettings())
    answer = await facilitator.settle(payload, requirements, idempotency_key="task-123")

or as an HTTP service (`x402-facilitator serve`, `create_app`) that any x402 resource server can call.
The x402 documents themselves are in `facilitator.wire`.
"""

from __future__ import annotations

from ._app import create_app
from ._claims import Claim, ClaimKey, ClaimState, ClaimStore
from ._client import FacilitatorClient, HttpFacilitatorClient
from ._config import FacilitatorSettings, load_private_key
from ._errors import (
    ChainError,
    ChainMismatchError,
    ChainUnavailableError,
    FacilitatorError,
    IdempotencyConflictError,
    InvalidIdempotencyKeyError,
    PaymentInvalidError,
    RpcError,
)
from ._recovery import authorization_used
from ._rpc import RpcCall, RpcClient
from ._service import Facilitator
from ._token import AUTHORIZATION_USED_TOPIC, TRANSFER_TOPIC

__all__ = [
    "AUTHORIZATION_USED_TOPIC",
    "ChainError",
    "ChainMismatchError",
    "ChainUnavailableError",
    "Claim",
    "ClaimKey",
    "ClaimState",
    "ClaimStore",
    "Facilitator",
    "FacilitatorClient",
    "FacilitatorError",
    "FacilitatorSettings",
    "HttpFacilitatorClient",
    "IdempotencyConflictError",
    "InvalidIdempotencyKeyError",
    "PaymentInvalidError",
    "RpcCall",
    "RpcClient",
    "RpcError",
    "TRANSFER_TOPIC",
    "authorization_used",
    "create_app",
    "load_private_key",
]
