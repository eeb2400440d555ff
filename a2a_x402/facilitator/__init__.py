"""Verify and settle x402 `exact` payments (EIP-3009 `transferWithAuthorization`) on an EVM chain.

In process::

    facilitator = await Facilitator.open(FacilitatorSettings())
    answer = await facilitator.settle(payload, requirements, idempotency_key="task-123")

or as an HTTP service (`x402-facilitator serve`, `create_app`) that any x402 resource server can call.
The x402 documents themselves are in `facilitator.wire`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562): `import facilitator.wire`, or one error
# type, must not start the HTTP app, the chain client and the key libraries (seconds of a command's start).
if TYPE_CHECKING:
    from ._api_keys import ApiKey, ApiKeyStore, KeyRules
    from ._app import create_app
    from ._checks import (
        CHECK_TIMEOUT_S,
        FOREIGN_SETTLEMENTS_COUNTED,
        ReadStatus,
        assets_check,
        check_asset_code,
        check_asset_domain,
        check_database,
        check_schema,
        erc6492_factories_check,
        foreign_settlements_check,
        network_check,
        read_once,
        refuse_on_fatal,
        relayer_check,
        schema_check,
    )
    from ._claims import Claim, ClaimKey, ClaimState, ClaimStore
    from ._client import FacilitatorClient, HttpFacilitatorClient
    from ._config import (
        FacilitatorSettings,
        erc6492_factories,
        evm_network,
        http_url,
        load_private_key,
        load_private_keys,
    )
    from ._errors import (
        ChainError,
        ChainMismatchError,
        ChainUnavailableError,
        FacilitatorAnswerError,
        FacilitatorError,
        IdempotencyConflictError,
        InvalidIdempotencyKeyError,
        PaymentInvalidError,
        RpcError,
    )
    from ._health import (
        check_facilitator,
        facilitator_checks,
        relayer_revert_checks,
        stored_revert_budget_check,
    )
    from ._metrics import FacilitatorMetrics, chain_gauges, facilitator_readings
    from ._nonce_state import authorization_used
    from ._permit2 import PERMIT2_ADDRESS
    from ._permit2_calls import PERMIT_SETTLING_TARGETS, SettledPermit, settled_permits
    from ._permit2_verified import permit2_schemes
    from ._pool import NoRelayerError, RelayerState
    from ._probe import ChainStatus, RelayerStatus, read_chain_status
    from ._replacement import bumped_fees
    from ._rpc import RpcCall, RpcClient, shown_origin
    from ._service import Facilitator
    from ._token import AUTHORIZATION_USED_TOPIC, TRANSFER_TOPIC

__all__ = [
    "AUTHORIZATION_USED_TOPIC",
    "ApiKey",
    "ApiKeyStore",
    "CHECK_TIMEOUT_S",
    "ChainError",
    "ChainMismatchError",
    "ChainStatus",
    "ChainUnavailableError",
    "Claim",
    "ClaimKey",
    "ClaimState",
    "ClaimStore",
    "FOREIGN_SETTLEMENTS_COUNTED",
    "Facilitator",
    "FacilitatorAnswerError",
    "FacilitatorClient",
    "FacilitatorError",
    "FacilitatorMetrics",
    "FacilitatorSettings",
    "HttpFacilitatorClient",
    "IdempotencyConflictError",
    "InvalidIdempotencyKeyError",
    "KeyRules",
    "NoRelayerError",
    "PERMIT2_ADDRESS",
    "PERMIT_SETTLING_TARGETS",
    "PaymentInvalidError",
    "ReadStatus",
    "RelayerState",
    "RelayerStatus",
    "RpcCall",
    "RpcClient",
    "RpcError",
    "SettledPermit",
    "TRANSFER_TOPIC",
    "authorization_used",
    "bumped_fees",
    "chain_gauges",
    "assets_check",
    "check_asset_code",
    "check_asset_domain",
    "check_database",
    "check_facilitator",
    "check_schema",
    "create_app",
    "erc6492_factories",
    "erc6492_factories_check",
    "evm_network",
    "http_url",
    "facilitator_checks",
    "facilitator_readings",
    "foreign_settlements_check",
    "load_private_key",
    "load_private_keys",
    "network_check",
    "permit2_schemes",
    "read_chain_status",
    "read_once",
    "relayer_check",
    "relayer_revert_checks",
    "refuse_on_fatal",
    "schema_check",
    "settled_permits",
    "shown_origin",
    "stored_revert_budget_check",
]

_EXPORTS = {
    "_api_keys": ("ApiKey", "ApiKeyStore", "KeyRules"),
    "_app": ("create_app",),
    "_checks": (
        "CHECK_TIMEOUT_S",
        "FOREIGN_SETTLEMENTS_COUNTED",
        "ReadStatus",
        "assets_check",
        "check_asset_code",
        "check_asset_domain",
        "check_database",
        "check_schema",
        "erc6492_factories_check",
        "foreign_settlements_check",
        "network_check",
        "read_once",
        "refuse_on_fatal",
        "relayer_check",
        "schema_check",
    ),
    "_claims": ("Claim", "ClaimKey", "ClaimState", "ClaimStore"),
    "_client": ("FacilitatorClient", "HttpFacilitatorClient"),
    "_config": (
        "FacilitatorSettings",
        "erc6492_factories",
        "evm_network",
        "http_url",
        "load_private_key",
        "load_private_keys",
    ),
    "_errors": (
        "ChainError",
        "ChainMismatchError",
        "ChainUnavailableError",
        "FacilitatorAnswerError",
        "FacilitatorError",
        "IdempotencyConflictError",
        "InvalidIdempotencyKeyError",
        "PaymentInvalidError",
        "RpcError",
    ),
    "_health": (
        "check_facilitator",
        "facilitator_checks",
        "relayer_revert_checks",
        "stored_revert_budget_check",
    ),
    "_metrics": ("FacilitatorMetrics", "chain_gauges", "facilitator_readings"),
    "_nonce_state": ("authorization_used",),
    "_permit2": ("PERMIT2_ADDRESS",),
    "_permit2_calls": ("PERMIT_SETTLING_TARGETS", "SettledPermit", "settled_permits"),
    "_permit2_verified": ("permit2_schemes",),
    "_pool": ("NoRelayerError", "RelayerState"),
    "_probe": ("ChainStatus", "RelayerStatus", "read_chain_status"),
    "_replacement": ("bumped_fees",),
    "_rpc": ("RpcCall", "RpcClient", "shown_origin"),
    "_service": ("Facilitator",),
    "_token": ("AUTHORIZATION_USED_TOPIC", "TRANSFER_TOPIC"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
