"""What the merchant asked for (`Terms`), and the checks an authorization must pass against it before the
chain is asked anything: the network, the recipient, the amount and the validity window.

Pure, no I/O. The window is judged by the wall clock, never the head block (see `_verify`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import PaymentInvalidError
from ._token import Authorization
from .wire import Reason

__all__ = ["Terms", "check_terms"]


@dataclass(frozen=True, slots=True)
class Terms:
    """What the merchant asked for: one x402 `PaymentRequirements`, normalised."""

    network: str
    chain_id: int
    asset: str
    pay_to: str
    amount: int
    token_name: str
    token_version: str


def check_terms(auth: Authorization, terms: Terms, *, chain_id: int, now: int, margin_s: int) -> None:
    """Refuse `auth` unless it pays `terms` on `chain_id` (this facilitator's chain), is valid at `now`
    (unix seconds) and stays valid `margin_s` longer, for its settlement to land.

    Raises PaymentInvalidError with the x402 reason of the first failed check.
    """
    if terms.chain_id != chain_id:
        raise PaymentInvalidError(
            Reason.INVALID_NETWORK, f"this facilitator settles on chain {chain_id} only"
        )
    if auth.to != terms.pay_to:
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_RECIPIENT_MISMATCH,
            "authorization.to is not the payTo address",
        )
    if auth.value != terms.amount:
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH,
            f"authorization.value {auth.value} is not the required amount {terms.amount}",
        )
    if auth.valid_after >= now:
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER,
            "the authorization is not valid yet",
        )
    if auth.valid_before <= now + margin_s:
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE,
            "the authorization expires before it could be settled",
        )
