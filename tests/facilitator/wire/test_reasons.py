"""Reason codes: spelled as the x402 Python SDK spells them, and none outside the spec's and the SDKs'."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import x402
from x402.mechanisms.evm import constants as sdk

from a2a_x402.facilitator.wire import Reason
from tests.fixtures.node import NODE_MODULES
from tests.fixtures.subprocesses import unavailable


def test_member_names_are_the_upper_cased_codes() -> None:
    for reason in Reason:
        assert reason.name == reason.value.upper()
        assert str(reason) == reason.value


def test_shared_codes_match_the_sdk_spelling() -> None:
    ours_from_sdk = {
        Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE: sdk.ERR_INVALID_SIGNATURE,
        Reason.INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET: sdk.ERR_UNDEPLOYED_SMART_WALLET,
        Reason.INVALID_EXACT_EVM_PAYLOAD_RECIPIENT_MISMATCH: sdk.ERR_RECIPIENT_MISMATCH,
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH: sdk.ERR_AUTHORIZATION_VALUE_MISMATCH,
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE: sdk.ERR_VALID_BEFORE_EXPIRED,
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER: sdk.ERR_VALID_AFTER_FUTURE,
        Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED: sdk.ERR_NONCE_ALREADY_USED,
        Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE: sdk.ERR_INSUFFICIENT_BALANCE,
        Reason.MISSING_EIP712_DOMAIN: sdk.ERR_MISSING_EIP712_DOMAIN,
        Reason.NETWORK_MISMATCH: sdk.ERR_NETWORK_MISMATCH,
        Reason.UNSUPPORTED_SCHEME: sdk.ERR_UNSUPPORTED_SCHEME,
        Reason.TRANSACTION_FAILED: sdk.ERR_TRANSACTION_FAILED,
        Reason.SETTLEMENT_PENDING: sdk.ERR_SETTLEMENT_PENDING,
        Reason.INVALID_EXACT_EVM_TOKEN_NAME_MISMATCH: sdk.ERR_TOKEN_NAME_MISMATCH,
        Reason.INVALID_EXACT_EVM_TOKEN_VERSION_MISMATCH: sdk.ERR_TOKEN_VERSION_MISMATCH,
        Reason.INVALID_EXACT_EVM_EIP3009_NOT_SUPPORTED: sdk.ERR_EIP3009_NOT_SUPPORTED,
        Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED: sdk.ERR_TRANSACTION_SIMULATION_FAILED,
        Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH: sdk.ERR_TRANSFER_EVENT_MISMATCH,
        Reason.ASSET_NOT_DEPLOYED_CONTRACT: sdk.ERR_ASSET_NOT_DEPLOYED_CONTRACT,
        Reason.INVALID_PERMIT2_SPENDER: sdk.ERR_PERMIT2_INVALID_SPENDER,
        Reason.INVALID_PERMIT2_RECIPIENT_MISMATCH: sdk.ERR_PERMIT2_RECIPIENT_MISMATCH,
        Reason.UPTO_FACILITATOR_MISMATCH: sdk.ERR_UPTO_FACILITATOR_MISMATCH,
        Reason.PERMIT2_TOKEN_MISMATCH: sdk.ERR_PERMIT2_TOKEN_MISMATCH,
        Reason.PERMIT2_AMOUNT_MISMATCH: sdk.ERR_PERMIT2_AMOUNT_MISMATCH,
        Reason.INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT: sdk.ERR_UPTO_SETTLEMENT_EXCEEDS_AMOUNT,
        Reason.PERMIT2_DEADLINE_EXPIRED: sdk.ERR_PERMIT2_DEADLINE_EXPIRED,
        Reason.PERMIT2_NOT_YET_VALID: sdk.ERR_PERMIT2_NOT_YET_VALID,
        Reason.PERMIT2_INVALID_OWNER: sdk.ERR_PERMIT2_INVALID_OWNER,
        Reason.PERMIT2_INVALID_DESTINATION: sdk.ERR_PERMIT2_INVALID_DESTINATION,
        Reason.INVALID_PERMIT2_SIGNATURE: sdk.ERR_PERMIT2_INVALID_SIGNATURE,
        Reason.EIP6492_FACTORY_NOT_ALLOWED: sdk.ERR_FACTORY_NOT_ALLOWED,
        Reason.PERMIT2_ALLOWANCE_REQUIRED: sdk.ERR_PERMIT2_ALLOWANCE_REQUIRED,
        Reason.PERMIT2_INSUFFICIENT_BALANCE: sdk.ERR_PERMIT2_INSUFFICIENT_BALANCE,
        Reason.INVALID_UPTO_EVM_TRANSACTION_FAILED: sdk.ERR_UPTO_TRANSACTION_FAILED,
    }
    for ours, theirs in ours_from_sdk.items():
        assert ours.value == theirs


# The x402 v2 specification's error registry (§9), beside the SDK's constants below.
_SPEC_REGISTRY = frozenset(
    {
        "insufficient_funds",
        "invalid_exact_evm_payload_authorization_valid_after",
        "invalid_exact_evm_payload_authorization_valid_before",
        "invalid_exact_evm_payload_authorization_value",
        "invalid_exact_evm_payload_signature",
        "invalid_exact_evm_payload_recipient_mismatch",
        "invalid_network",
        "invalid_payload",
        "invalid_payment_requirements",
        "invalid_scheme",
        "unsupported_scheme",
        "invalid_x402_version",
        "invalid_transaction_state",
        "unexpected_verify_error",
        "unexpected_settle_error",
    }
)


def _sdk_codes() -> set[str]:
    """Every `ERR_* = "..."` code in the installed SDK's source.

    Read from the source, not imported: the SVM mechanism (which declares `duplicate_settlement`) needs
    Solana packages this project does not install.
    """
    codes: set[str] = set()
    for path in Path(x402.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if any(n.startswith("ERR_") for n in names) and isinstance(node.value.value, str):
                    codes.add(node.value.value)
    return codes


# Permit2 codes of the x402 TypeScript SDK (`@x402/evm` 2.27's `Err*` constants) for checks the Python SDK
# names only with a literal of the same spelling (a used nonce, the EIP-2612 extension) or does not make.
_TYPESCRIPT_PERMIT2 = frozenset(
    {
        "permit2_proxy_not_deployed",
        "permit2_invalid_nonce",
        "permit2_2612_amount_mismatch",
        "permit2_simulation_failed",
        "invalid_eip2612_extension_format",
        "eip2612_from_mismatch",
        "eip2612_asset_mismatch",
        "eip2612_spender_not_permit2",
        "eip2612_deadline_expired",
    }
)


def test_every_code_we_emit_is_a_spec_or_sdk_spelling() -> None:
    vocabulary = _SPEC_REGISTRY | _sdk_codes() | _TYPESCRIPT_PERMIT2
    assert {reason.value for reason in Reason} - vocabulary == set()


def test_the_typescript_codes_are_the_typescript_sdks() -> None:
    built = NODE_MODULES / "@x402" / "evm" / "dist" / "cjs"
    sources = [built / kind / "facilitator" / "index.js" for kind in ("exact", "upto")]
    if not all(source.is_file() for source in sources):
        unavailable(f"@x402/evm is missing from {NODE_MODULES}: run ./scripts/setup")
    constants = {
        match.group(1)
        for source in sources
        for match in re.finditer(r'var Err\w+ = "([a-z0-9_]+)";', source.read_text(encoding="utf-8"))
    }
    assert _TYPESCRIPT_PERMIT2 - constants == set()
