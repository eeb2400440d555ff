"""The words a payer reads when a payment failed: what happened and what to do, matching the code."""

from __future__ import annotations

import pytest

from a2a_x402.extension import PaymentErrorCode
from a2a_x402.facilitator.wire import Reason
from a2a_x402.merchant.payments._outcomes import failure_text

_UNREACHED = "the facilitator could not be reached, or could not reach the chain"
_ENDED_LATER = "nothing was charged; this task has ended: send the request again later for new terms"


@pytest.mark.parametrize(
    ("stage", "code", "reason", "detail", "expected"),
    [
        pytest.param(
            "Settlement",
            PaymentErrorCode.SETTLEMENT_FAILED,
            Reason.UNEXPECTED_SETTLE_ERROR,
            "the chain could not be reached; try again",
            f"Settlement failed: {_UNREACHED}; {_ENDED_LATER}",
            id="chain down: the facilitator's 'try again' is not for the payer",
        ),
        pytest.param(
            "Payment verification",
            PaymentErrorCode.SETTLEMENT_FAILED,
            Reason.UNEXPECTED_VERIFY_ERROR,
            "RuntimeError: pool closed",
            f"Payment verification failed: {_UNREACHED}; {_ENDED_LATER}",
            id="an exception's text never reaches the payer",
        ),
        pytest.param(
            "Payment verification",
            PaymentErrorCode.INVALID_SIGNATURE,
            "invalid_exact_evm_payload_signature",
            "the signature does not recover the payer",
            # The facilitator's own words stay in the log: the payer reads the code's.
            "Payment verification failed: the authorization's signature is not the payer's; nothing was "
            "charged; this task has ended: send the request again for new terms",
            id="terminal",
        ),
        pytest.param(
            "Settlement",
            PaymentErrorCode.INSUFFICIENT_FUNDS,
            "insufficient_funds",
            None,
            "Settlement failed: the payer's balance does not cover the payment; fund the payer, then pay the "
            "new terms",
            id="retryable: fresh terms on the same task",
        ),
        pytest.param(
            "Payment verification",
            PaymentErrorCode.EXPIRED_PAYMENT,
            "invalid_exact_evm_payload_authorization_valid_before",
            "expired",
            "Payment verification failed: the authorization is not valid at this time; sign the new terms "
            "and pay again",
            id="expired",
        ),
    ],
)
def test_failure_text_says_what_happened_and_what_the_payer_can_do(
    stage: str, code: PaymentErrorCode, reason: str, detail: str | None, expected: str
) -> None:
    assert failure_text(stage, code, reason, detail) == expected


def test_a_retryable_code_on_a_task_that_ends_anyway_offers_no_fresh_terms() -> None:
    # Recovery fails the task whatever the code: a payment that expired waiting is not asked for again.
    said = failure_text(
        "Settlement", PaymentErrorCode.EXPIRED_PAYMENT, "permit2_deadline_expired", None, ended=True
    )

    assert said == (
        "Settlement failed: the authorization is not valid at this time; nothing was charged; this task has "
        "ended: send the request again for new terms"
    )
