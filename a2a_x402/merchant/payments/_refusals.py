"""What a client is told of a facilitator's refusal, and what the operator's log keeps of it.

Facilitators speak different dialects (ours, the x402 Python and TypeScript SDKs', hosted ones): the reason
names differ, and their messages are free text (a node's error, viem's whole revert with the call's
arguments, an exception). The code a refusal means is read from the name and, for a name that means no
code by itself, from the revert text (`a2a_x402.error_code_for_reason`). The client gets that code and
our own sentence for it, and a receipt holding only the reason's name; the facilitator's text goes to the
operator's log, on one line. A refusal of a payment's AP2 mandates (§20.6) is an `InvalidParamsError` whose
`ErrorInfo` metadata carries the `ap2Error` code and, when the mandates could be read, the merchant's error
receipts (`mandate_refusal`); the verifier's reason reaches the client on one bounded line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from a2a.utils.errors import InvalidParamsError

from a2a_x402.extension import Ap2Receipts, PaymentErrorCode, reason_name
from a2a_x402.facilitator.wire import SettleResponse

if TYPE_CHECKING:
    from ..ap2 import MandateRefused

__all__ = ["CLIENT_TEXTS", "client_receipt", "client_text", "mandate_refusal", "one_line"]

CLIENT_TEXTS: Mapping[PaymentErrorCode, str] = MappingProxyType(
    {
        PaymentErrorCode.INSUFFICIENT_FUNDS: "the payer's balance does not cover the payment",
        PaymentErrorCode.INVALID_SIGNATURE: "the authorization's signature is not the payer's",
        PaymentErrorCode.EXPIRED_PAYMENT: "the authorization is not valid at this time",
        PaymentErrorCode.DUPLICATE_NONCE: "the authorization was already used",
        PaymentErrorCode.NETWORK_MISMATCH: "the payment is for another network",
        PaymentErrorCode.INVALID_AMOUNT: "the authorization does not pay the price",
        PaymentErrorCode.SETTLEMENT_FAILED: "the payment could not be settled",
    }
)
"""Our sentence for each code: all a client reads of why its payment was refused."""

# Token refusals that no code names (a paused token, a blacklist), recognised in the facilitator's text
# (ours, or the revert text FiatToken's `Pausable`/`Blacklistable` give any facilitator) and told to the
# client in our words: the payer can tell a token that refuses everyone from a payment it got wrong.
_TOKEN_REFUSALS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), text)
    for pattern, text in (
        (r"blacklisted the payTo", "the token has blacklisted the payee"),
        (r"blacklisted the payer", "the token has blacklisted the payer"),
        (r"account is blacklisted", "the token has blacklisted the payer or the payee"),
        (r"Pausable: paused|token is paused", "the token is paused"),
    )
)

# The longest facilitator text one log line keeps (viem's revert texts run to kilobytes).
_LOGGED_CHARS = 500
_WHITESPACE = re.compile(r"\s+")
# A revert dump quotes the call's arguments, signature included (v, r, s, or the 65-byte blob): an
# authorization not yet settled is as good as the payment to whoever reads it, so logs never keep them.
_CALL_ARGS = re.compile(r"args:\s*\([^)]*\)?")
_SIGNATURE = re.compile(r"0x[0-9a-fA-F]{130,}")
# The longest reason of a mandates refusal a client reads (the AP2 SDK's texts are unbounded), and the
# base64url runs it never quotes (a token, a disclosure, a key).
_MANDATE_DETAIL_CHARS = 300
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_.~-]{40,}")


def client_text(code: PaymentErrorCode, said: str | None) -> str:
    """Our sentence for a refusal with `code`: the code's, or for a failed settlement a token refusal that
    the facilitator's text (`said`, never shown itself) names."""
    if code is PaymentErrorCode.SETTLEMENT_FAILED and said:
        for pattern, text in _TOKEN_REFUSALS:
            if pattern.search(said):
                return text
    return CLIENT_TEXTS[code]


def one_line(text: str) -> str:
    """`text` on one line (whitespace runs, newlines included, become one space), at most 500 characters,
    without the call arguments or signatures a revert dump quotes."""
    flat = _WHITESPACE.sub(" ", text).strip()
    flat = _SIGNATURE.sub("0x…", _CALL_ARGS.sub("args: (…)", flat))
    return flat if len(flat) <= _LOGGED_CHARS else flat[: _LOGGED_CHARS - 1] + "…"


def client_receipt(response: SettleResponse) -> SettleResponse:
    """`response` as a client may see it: no message, and a reason only if it is a reason's name (a reason
    that is free text, or a name with text appended, keeps its name or becomes `unexpected_settle_error`)."""
    if response.error_reason is None and response.error_message is None:
        return response
    reason = response.error_reason
    if reason is not None:
        reason = reason_name(reason) or "unexpected_settle_error"
    return response.model_copy(update={"error_reason": reason, "error_message": None})


def mandate_refusal(refused: MandateRefused, receipts: Ap2Receipts | None = None) -> InvalidParamsError:
    """What a client is told of its refused mandates: the task unchanged, the terms still valid (§20.6).

    Its `data` (the `ErrorInfo` metadata on every binding) carries `ap2Error` and, with `receipts`, the
    error receipts as `ap2CheckoutReceipt` and `ap2PaymentReceipt`. The reason is one line of at most 300
    characters, without token-like runs.
    """
    detail = _TOKEN_LIKE.sub("…", " ".join(refused.detail.split())) or "refused"
    if len(detail) > _MANDATE_DETAIL_CHARS:
        detail = detail[: _MANDATE_DETAIL_CHARS - 1] + "…"
    data = {"ap2Error": refused.code.value}
    if receipts is not None:
        data["ap2CheckoutReceipt"] = receipts.checkout_receipt
        data["ap2PaymentReceipt"] = receipts.payment_receipt
    return InvalidParamsError(
        message=f"the AP2 mandates do not authorize this payment ({refused.code.value}): {detail}", data=data
    )
