"""Reason codes: spelled as the x402 Python SDK spells them."""

from __future__ import annotations

from x402.mechanisms.evm import constants as sdk

from facilitator.wire import Reason


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
    }
    for ours, theirs in ours_from_sdk.items():
        assert ours.value == theirs
