from __future__ import annotations

import pytest

from a2a_x402.extension import (
    REASON_ERROR_CODES,
    RETRYABLE_ERROR_CODES,
    SETTLEMENT_PENDING_REASON,
    PaymentErrorCode,
    PaymentStatus,
    error_code_for_reason,
    reason_name,
)
from a2a_x402.facilitator.wire import Reason

EC = PaymentErrorCode


def test_status_values() -> None:
    assert [s.value for s in PaymentStatus] == [
        "payment-required",
        "payment-submitted",
        "payment-verified",
        "payment-completed",
        "payment-failed",
        "payment-rejected",
    ]


def test_error_code_values_are_their_names() -> None:
    assert [c.value for c in PaymentErrorCode] == [
        "INSUFFICIENT_FUNDS",
        "INVALID_SIGNATURE",
        "EXPIRED_PAYMENT",
        "DUPLICATE_NONCE",
        "NETWORK_MISMATCH",
        "INVALID_AMOUNT",
        "SETTLEMENT_FAILED",
    ]


def test_only_expired_and_insufficient_funds_are_retryable() -> None:
    assert RETRYABLE_ERROR_CODES == {EC.EXPIRED_PAYMENT, EC.INSUFFICIENT_FUNDS}


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        ("insufficient_funds", EC.INSUFFICIENT_FUNDS),
        ("invalid_exact_evm_insufficient_balance", EC.INSUFFICIENT_FUNDS),
        ("permit2_insufficient_balance", EC.INSUFFICIENT_FUNDS),
        ("invalid_exact_evm_payload_signature", EC.INVALID_SIGNATURE),
        ("invalid_exact_evm_signature", EC.INVALID_SIGNATURE),
        ("invalid_exact_evm_payload_undeployed_smart_wallet", EC.INVALID_SIGNATURE),
        ("eip6492_factory_not_allowed", EC.INVALID_SIGNATURE),
        ("invalid_exact_evm_payload_authorization_valid_before", EC.EXPIRED_PAYMENT),
        # Spec v0.3 §7.5: expired *or not yet valid* is EXPIRED_PAYMENT (retryable, fresh terms).
        ("invalid_exact_evm_payload_authorization_valid_after", EC.EXPIRED_PAYMENT),
        ("permit2_not_yet_valid", EC.EXPIRED_PAYMENT),
        ("permit2_deadline_expired", EC.EXPIRED_PAYMENT),
        ("invalid_exact_evm_nonce_already_used", EC.DUPLICATE_NONCE),
        ("permit2_invalid_nonce", EC.DUPLICATE_NONCE),
        ("duplicate_settlement", EC.DUPLICATE_NONCE),
        ("network_mismatch", EC.NETWORK_MISMATCH),
        ("invalid_network", EC.NETWORK_MISMATCH),
        ("invalid_exact_evm_network_mismatch", EC.NETWORK_MISMATCH),
        ("invalid_exact_evm_payload_authorization_value_mismatch", EC.INVALID_AMOUNT),
        ("invalid_exact_evm_payload_authorization_value", EC.INVALID_AMOUNT),
        ("invalid_exact_evm_authorization_value", EC.INVALID_AMOUNT),
        # Everything else, known to x402 or not, is a settlement failure.
        ("transaction_failed", EC.SETTLEMENT_FAILED),
        ("invalid_transaction_state", EC.SETTLEMENT_FAILED),
        ("unexpected_settle_error", EC.SETTLEMENT_FAILED),
        ("invalid_exact_evm_payload_recipient_mismatch", EC.SETTLEMENT_FAILED),
        ("something_new_from_a_future_sdk", EC.SETTLEMENT_FAILED),
        ("INSUFFICIENT_FUNDS", EC.SETTLEMENT_FAILED),
        ("", EC.SETTLEMENT_FAILED),
        (None, EC.SETTLEMENT_FAILED),
    ],
)
def test_error_code_for_reason(reason: str | None, code: PaymentErrorCode) -> None:
    assert error_code_for_reason(reason) is code


def test_settlement_pending_is_not_a_failure() -> None:
    assert SETTLEMENT_PENDING_REASON == "settlement_pending"
    assert SETTLEMENT_PENDING_REASON not in REASON_ERROR_CODES
    with pytest.raises(ValueError, match="not a failure"):
        error_code_for_reason(SETTLEMENT_PENDING_REASON)


# What each reason our own facilitator emits must become; a new Reason member fails this test
# until someone decides its extension code.
_FACILITATOR_REASONS: dict[str, PaymentErrorCode | None] = {
    # Permit2 (`exact` by Permit2, and `upto`), verified and settled. A used Permit2 nonce is a replay, as
    # an EIP-3009 one; a payer who must approve Permit2 first, or whose permit the token refuses, sent a
    # payment that cannot be made as it is.
    "permit2_insufficient_balance": EC.INSUFFICIENT_FUNDS,
    "permit2_invalid_nonce": EC.DUPLICATE_NONCE,
    **dict.fromkeys(
        (
            "permit2_proxy_not_deployed",
            "permit2_allowance_required",
            "permit2_2612_amount_mismatch",
            "invalid_eip2612_extension_format",
            "eip2612_from_mismatch",
            "eip2612_asset_mismatch",
            "eip2612_spender_not_permit2",
            "eip2612_deadline_expired",
            "permit2_simulation_failed",
            "invalid_upto_evm_transaction_failed",
        ),
        EC.SETTLEMENT_FAILED,
    ),
    "invalid_payload": EC.SETTLEMENT_FAILED,
    "invalid_payment_requirements": EC.SETTLEMENT_FAILED,
    "invalid_x402_version": EC.SETTLEMENT_FAILED,
    "invalid_network": EC.NETWORK_MISMATCH,
    "unsupported_scheme": EC.SETTLEMENT_FAILED,
    "network_mismatch": EC.NETWORK_MISMATCH,
    "missing_eip712_domain": EC.SETTLEMENT_FAILED,
    "invalid_exact_evm_payload_recipient_mismatch": EC.SETTLEMENT_FAILED,
    "invalid_exact_evm_payload_authorization_value_mismatch": EC.INVALID_AMOUNT,
    "invalid_exact_evm_payload_authorization_valid_before": EC.EXPIRED_PAYMENT,
    # Spec v0.3 §7.5: not yet valid is outside the window like expired: EXPIRED_PAYMENT.
    "invalid_exact_evm_payload_authorization_valid_after": EC.EXPIRED_PAYMENT,
    "invalid_exact_evm_payload_signature": EC.INVALID_SIGNATURE,
    "invalid_exact_evm_payload_undeployed_smart_wallet": EC.INVALID_SIGNATURE,
    # An undeployed wallet whose factory this facilitator does not call: as good as no ERC-6492 data.
    "eip6492_factory_not_allowed": EC.INVALID_SIGNATURE,
    # A factory that cannot deploy the wallet: not a wrong signature, a payment that cannot be made.
    "smart_wallet_deployment_failed": EC.SETTLEMENT_FAILED,
    "asset_not_deployed_contract": EC.SETTLEMENT_FAILED,
    "invalid_exact_evm_nonce_already_used": EC.DUPLICATE_NONCE,
    "invalid_exact_evm_insufficient_balance": EC.INSUFFICIENT_FUNDS,
    "invalid_exact_evm_token_name_mismatch": EC.SETTLEMENT_FAILED,
    "invalid_exact_evm_token_version_mismatch": EC.SETTLEMENT_FAILED,
    "invalid_exact_evm_eip3009_not_supported": EC.SETTLEMENT_FAILED,
    "invalid_exact_evm_transaction_simulation_failed": EC.SETTLEMENT_FAILED,
    # Permit2 (`exact` by Permit2, and `upto`): the SDKs' codes, read as their EIP-3009 counterparts are.
    "invalid_permit2_spender": EC.SETTLEMENT_FAILED,
    "invalid_permit2_recipient_mismatch": EC.SETTLEMENT_FAILED,
    "upto_facilitator_mismatch": EC.SETTLEMENT_FAILED,
    "permit2_token_mismatch": EC.SETTLEMENT_FAILED,
    "permit2_amount_mismatch": EC.INVALID_AMOUNT,
    # The merchant's mistake, not the payer's: nothing the payer could sign differently.
    "invalid_upto_evm_payload_settlement_exceeds_amount": EC.SETTLEMENT_FAILED,
    "permit2_deadline_expired": EC.EXPIRED_PAYMENT,
    "permit2_not_yet_valid": EC.EXPIRED_PAYMENT,
    "permit2_invalid_owner": EC.SETTLEMENT_FAILED,
    "permit2_invalid_destination": EC.SETTLEMENT_FAILED,
    "invalid_permit2_signature": EC.INVALID_SIGNATURE,
    "transaction_failed": EC.SETTLEMENT_FAILED,
    "invalid_exact_evm_transfer_event_mismatch": EC.SETTLEMENT_FAILED,
    "settlement_pending": None,
    "duplicate_settlement": EC.DUPLICATE_NONCE,
    "unexpected_verify_error": EC.SETTLEMENT_FAILED,
    "unexpected_settle_error": EC.SETTLEMENT_FAILED,
}


def test_every_reason_of_our_facilitator_has_a_decided_code() -> None:
    assert {r.value for r in Reason} == set(_FACILITATOR_REASONS)
    for reason, code in _FACILITATOR_REASONS.items():
        if code is None:
            with pytest.raises(ValueError):
                error_code_for_reason(reason)
        else:
            assert error_code_for_reason(reason) is code, reason


# viem's revert text as the TypeScript SDK's facilitator sends it in `invalidMessage` (abridged).
_VIEM_REVERT = (
    'The contract function "transferWithAuthorization" reverted with the following reason:\n'
    "{}\n\nContract Call:\n  address:   0x5FbDB2315678afecb367f032d93F642f64180aa3\n"
    "  args: (0x5160, 0x2361, 250000)\n\nVersion: viem@2.57.20"
)


@pytest.mark.parametrize(
    ("reason", "message", "code"),
    [
        # Both SDKs' names for one fault.
        ("invalid_exact_evm_payload_signature", None, EC.INVALID_SIGNATURE),
        ("invalid_exact_evm_signature", None, EC.INVALID_SIGNATURE),
        ("invalid_exact_evm_failed_to_verify_signature", None, EC.INVALID_SIGNATURE),
        ("invalid_exact_evm_failed_to_parse_signature", None, EC.INVALID_SIGNATURE),
        ("duplicate_settlement", None, EC.DUPLICATE_NONCE),
        ("invalid_exact_evm_nonce_already_used", None, EC.DUPLICATE_NONCE),
        # A simulation that reverted: read by the token's revert text.
        (
            "invalid_exact_evm_transaction_simulation_failed",
            _VIEM_REVERT.format("ERC20: transfer amount exceeds balance"),
            EC.INSUFFICIENT_FUNDS,
        ),
        (
            "invalid_exact_evm_transaction_simulation_failed",
            _VIEM_REVERT.format("FiatTokenV2: authorization is used or canceled"),
            EC.DUPLICATE_NONCE,
        ),
        (
            "invalid_exact_evm_transaction_simulation_failed",
            _VIEM_REVERT.format("FiatTokenV2: invalid signature"),
            EC.INVALID_SIGNATURE,
        ),
        (
            "invalid_exact_evm_transaction_simulation_failed",
            _VIEM_REVERT.format("FiatTokenV2: authorization is expired"),
            EC.EXPIRED_PAYMENT,
        ),
        (
            "invalid_exact_evm_transaction_simulation_failed",
            "reverted: 0xe450d38c0000",
            EC.INSUFFICIENT_FUNDS,
        ),
        ("invalid_exact_evm_transaction_simulation_failed", None, EC.SETTLEMENT_FAILED),
        (
            "invalid_exact_evm_transaction_simulation_failed",
            _VIEM_REVERT.format("Pausable: paused"),
            EC.SETTLEMENT_FAILED,
        ),
        # The TypeScript SDK appends a revert's text to the name, or sends an exception's text as the reason.
        (
            "invalid_exact_evm_transaction_failed: ERC20: transfer amount exceeds balance",
            None,
            EC.INSUFFICIENT_FUNDS,
        ),
        ("invalid_exact_evm_nonce_already_used: whatever follows", None, EC.DUPLICATE_NONCE),
        ("Execution reverted: FiatTokenV2: authorization is used or canceled", None, EC.DUPLICATE_NONCE),
        # The relayer out of gas is not the payer out of funds.
        ("transaction_failed", "insufficient funds for gas * price + value", EC.SETTLEMENT_FAILED),
        (None, None, EC.SETTLEMENT_FAILED),
        ("", "", EC.SETTLEMENT_FAILED),
    ],
)
def test_error_code_for_reason_reads_every_facilitators_vocabulary(
    reason: str | None, message: str | None, code: PaymentErrorCode
) -> None:
    assert error_code_for_reason(reason, message) is code


@pytest.mark.parametrize(
    ("reason", "name"),
    [
        ("invalid_exact_evm_signature", "invalid_exact_evm_signature"),
        (
            "invalid_exact_evm_transaction_failed: ERC20: transfer amount exceeds balance",
            "invalid_exact_evm_transaction_failed",
        ),
        ("Execution reverted: FiatTokenV2: authorization is used", None),
        ("x" * 101, None),
        ("", None),
        (None, None),
    ],
)
def test_reason_name_keeps_only_a_name(reason: str | None, name: str | None) -> None:
    assert reason_name(reason) == name
