"""`merchant.payments._refusals`: a client reads our words and reason names, never a facilitator's text."""

from __future__ import annotations

import pytest

from a2a_x402.extension import Ap2ErrorCode, Ap2Receipts, PaymentErrorCode
from a2a_x402.facilitator.wire import SettleResponse
from a2a_x402.merchant.ap2 import MandateRefused
from a2a_x402.merchant.payments._refusals import (
    CLIENT_TEXTS,
    client_receipt,
    client_text,
    mandate_refusal,
    one_line,
)

_TX = "0x" + "ab" * 32


def _failed(reason: str | None, message: str | None) -> SettleResponse:
    return SettleResponse(
        success=False, error_reason=reason, error_message=message, transaction="", network="eip155:31337"
    )


def test_every_code_has_our_sentence() -> None:
    assert set(CLIENT_TEXTS) == set(PaymentErrorCode)


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("invalid_exact_evm_nonce_already_used", "invalid_exact_evm_nonce_already_used"),
        (
            "invalid_exact_evm_transaction_failed: ERC20: transfer amount exceeds balance",
            "invalid_exact_evm_transaction_failed",
        ),
        ("Execution reverted: FiatTokenV2: authorization is used or canceled", "unexpected_settle_error"),
        (None, None),
    ],
)
def test_a_receipt_keeps_only_the_reasons_name_and_no_message(reason: str | None, shown: str | None) -> None:
    receipt = client_receipt(_failed(reason, "viem@2: Contract Call: args: (0x51606292884C4fcd)"))

    assert (receipt.error_reason, receipt.error_message) == (shown, None)
    assert "errorMessage" not in receipt.to_json_dict()


def test_a_successful_receipt_is_unchanged() -> None:
    settled = SettleResponse(success=True, transaction=_TX, network="eip155:31337", extensions={"a": 1})

    assert client_receipt(settled) is settled


@pytest.mark.parametrize(
    ("code", "said", "text"),
    [
        (PaymentErrorCode.SETTLEMENT_FAILED, "Pausable: paused", "the token is paused"),
        (
            PaymentErrorCode.SETTLEMENT_FAILED,
            "the token has blacklisted the payer authorization.from (Blacklistable: account is blacklisted)",
            "the token has blacklisted the payer",
        ),
        (
            PaymentErrorCode.SETTLEMENT_FAILED,
            "the token has blacklisted the payTo (Blacklistable: account is blacklisted)",
            "the token has blacklisted the payee",
        ),
        (
            PaymentErrorCode.SETTLEMENT_FAILED,
            "reverted with: Blacklistable: account is blacklisted",
            "the token has blacklisted the payer or the payee",
        ),
        (PaymentErrorCode.SETTLEMENT_FAILED, "<script>alert(1)</script>", "the payment could not be settled"),
        (PaymentErrorCode.SETTLEMENT_FAILED, None, "the payment could not be settled"),
        (
            PaymentErrorCode.INSUFFICIENT_FUNDS,
            "Pausable: paused",
            "the payer's balance does not cover the payment",
        ),
    ],
)
def test_the_client_text_is_ours(code: PaymentErrorCode, said: str | None, text: str) -> None:
    assert client_text(code, said) == text


def test_the_logged_text_is_one_bounded_line() -> None:
    said = "The contract function reverted:\n\n  ERC20: transfer amount exceeds balance\r\n" + "x" * 5_000

    line = one_line(said)

    assert "\n" not in line and "\r" not in line and len(line) == 500
    assert line.startswith("The contract function reverted: ERC20: transfer amount exceeds balance x")
    assert one_line("  short  text ") == "short text"


def test_the_logged_text_keeps_no_call_arguments_or_signature() -> None:
    r = "0x" + "1f" * 32
    said = (
        'The contract function "transferWithAuthorization" reverted with the following reason:\n'
        "ERC20: transfer amount exceeds balance\n\nContract Call:\n"
        f"  args: (0x5160, 0x2361, 250000, 1796403588, 1796403948, 0xfa05, 27, {r}, {r})\n"
        f"signature {'0x' + 'ab' * 65}"
    )

    line = one_line(said)

    assert "ERC20: transfer amount exceeds balance" in line
    assert r not in line and "ab" * 65 not in line and "250000" not in line
    assert "args: (…)" in line


def test_a_mandates_refusal_says_one_bounded_line_without_tokens_and_carries_its_receipts() -> None:
    token = "eyJ" + "A" * 400
    refused = MandateRefused(Ap2ErrorCode.INVALID_MANDATE, "x")
    refused.detail = f"the SDK says\n{token} " + "why " * 200  # however long the verifier's text

    error = mandate_refusal(refused, Ap2Receipts("c.c.c", "p.p.p"))

    assert error.message is not None
    assert "\n" not in error.message and token not in error.message
    assert len(error.message) <= 400
    assert error.data == {
        "ap2Error": "invalid_mandate",
        "ap2CheckoutReceipt": "c.c.c",
        "ap2PaymentReceipt": "p.p.p",
    }
    assert mandate_refusal(refused).data == {"ap2Error": "invalid_mandate"}
