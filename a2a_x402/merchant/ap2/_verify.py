"""The merchant's verification of a payment's mandates (§20.5): steps 1 to 5, in order, before anything
of the payment is recorded.

``verify_mandates`` takes what the payment layer holds when a ``payment-submitted`` message with a
mandates part reaches a tenant in the embedded flow: the tenant's declaration and trusted issuer keys,
the checkout JWT stored for the task's current round, the decoded x402 payment and the mandates part.
It returns the ``AcceptedMandates`` (what the usage record, the ledger and the receipts need) or raises
``MandateRefused`` with the ``ap2Error`` code of §20.6. It reads nothing but the usage record of the
open payment mandate, through the caller's ``UsageReader``, and writes nothing: a refusal changes
nothing, and the reservation that counts the payment is the usage store's (``_usage``), which checks
step 5 again under its lock.

The SDK (through ``_sdk``) checks the chains, the constraints and the two hashes it knows of. The
bindings it does not know are checked here: the closed checkout mandate carries the stored checkout
itself, the payee is the tenant's merchant, the amount is the checkout's total, and the instrument names
the network of ``accepted``, the payer of the authorization and, by ``payload_hash``, the very payment
beside the mandates.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from a2a_x402.extension import (
    Ap2Declaration,
    Ap2ErrorCode,
    Ap2Mandates,
    ExtensionMetadataError,
    X402PaymentPayload,
    ap2_digest,
    payload_hash,
)
from a2a_x402.facilitator.wire import (
    ExactPermit2PaymentPayload,
    PaymentPayload,
    PaymentPayloadV1,
    UptoPaymentPayload,
    signer_of,
)

from ._keys import b64url_decode
from ._receipts import ReceiptSubject
from ._sdk import (
    IssuerKeys,
    MandateKind,
    MandateRefused,
    MandateUsage,
    VerifiedMandate,
    check_checkout_mandate,
    check_payment_mandate,
    verify_mandate,
)

__all__ = ["AcceptedMandates", "StoredCheckoutError", "UsageReader", "verify_mandates"]

UsageReader = Callable[[str], Awaitable[MandateUsage]]
"""Reads the merchant's record of an open payment mandate, by its key (``VerifiedMandate.open_key``)."""

_Payment = PaymentPayload | ExactPermit2PaymentPayload | UptoPaymentPayload
"""The x402 version 2 payments the embedded flow carries (§20.4)."""

_INSTRUMENT_TYPE = "x402"
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


class StoredCheckoutError(Exception):
    """The checkout stored for the round is not one this merchant signs (its claims unreadable): the
    merchant's fault, not the client's. Its text says what is wrong, never the token."""


@dataclass(frozen=True, slots=True)
class AcceptedMandates:
    """Mandates that authorize the payment beside them (§20.5 steps 1 to 5 passed).

    Attributes:
        checkout: the verified checkout mandate chain.
        payment: the verified payment mandate chain.
        checkout_hash: the hash of the round's checkout JWT: the payment mandate's ``transaction_id``.
        checkout_id: the checkout's ``id``, the round's ``offerId``: a payment receipt's ``payment_id``.
        open_mandate: the usage key of the open payment mandate (the hash of its issuer-signed JWT).
        payment_reference: the closed payment mandate's reference: the payment receipt's ``reference``,
            and the key of its one use.
        amount: the payment mandate's ``payment_amount``, in minor units of ``currency`` (for ``upto``,
            the maximum): what the payment counts against the open mandate's budget.
        currency: its ISO 4217 currency.
    """

    checkout: VerifiedMandate
    payment: VerifiedMandate
    checkout_hash: str
    checkout_id: str
    open_mandate: str
    payment_reference: str
    amount: int
    currency: str

    @property
    def checkout_reference(self) -> str:
        """The closed checkout mandate's reference: the checkout receipt's ``reference``."""
        return self.checkout.closed_reference

    def receipt_subject(self, task_id: str) -> ReceiptSubject:
        """What the round's AP2 receipts answer, for the task ``task_id`` (the order)."""
        return ReceiptSubject(
            checkout_reference=self.checkout_reference,
            payment_reference=self.payment_reference,
            order_id=task_id,
            payment_id=self.checkout_id,
        )

    def check_usage(self, usage: MandateUsage) -> None:
        """Step 5 again against ``usage``: the usage store runs it on the record it holds locked.

        Raises:
            MandateRefused: a constraint of the open payment mandate fails against ``usage`` (the budget,
                the recurrence), as in ``verify_mandates``.
        """
        check_payment_mandate(
            self.payment,
            transaction_id=self.checkout_hash,
            open_checkout_hash=self.checkout.open_hash,
            usage=usage,
        )


@dataclass(frozen=True, slots=True)
class _Checkout:
    """What the verification reads of the round's stored checkout JWT."""

    jwt: str
    hash: str
    id: str
    total: int
    currency: str
    expires_at: int


async def verify_mandates(
    declaration: Ap2Declaration,
    issuers: IssuerKeys,
    *,
    checkout_jwt: str,
    payment: X402PaymentPayload,
    mandates: Ap2Mandates,
    usage: UsageReader,
    now: int,
    clock_skew_s: int = 300,
) -> AcceptedMandates:
    """Verify ``mandates`` for ``payment`` to the tenant of ``declaration`` (§20.5), at ``now`` (unix
    seconds), allowing ``clock_skew_s`` on the mandates' times (the checkout's ``exp`` is the merchant's
    own, and holds to the second).

    ``checkout_jwt`` is the checkout the merchant stored for the task's current round, ``payment`` the
    decoded ``payload`` of the ``payment-submitted`` extension object, and ``usage`` reads the record of
    the open payment mandate for step 5. The signature checks run off the event loop.

    Raises:
        MandateRefused: the mandates do not authorize the payment; ``code`` is the ``ap2Error`` of the
            first step that fails (``invalid_credential`` for step 1, ``invalid_mandate`` for steps 2
            to 5, ``unresolved_constraint`` for a constraint that cannot be evaluated,
            ``mandates_not_supported`` for a mandate or a payment not of §20.4's form).
        StoredCheckoutError: ``checkout_jwt`` is not a checkout this merchant signs (its claims
            unreadable); nothing was verified.
    """
    checkout = _read_checkout(checkout_jwt)
    if isinstance(payment, PaymentPayloadV1):
        raise MandateRefused(
            Ap2ErrorCode.MANDATES_NOT_SUPPORTED, "mandates come with an x402 version 2 payment (§20.4)"
        )
    # 1. The chains: signatures, bindings (aud = the tenant's merchant, nonce = the checkout id), times.
    checkout_mandate, payment_mandate = await asyncio.to_thread(
        _verify_chains, mandates, issuers, declaration.merchant.id, checkout.id, now, clock_skew_s
    )
    # 2. and 3. The round's checkout, carried whole and named by its hash, and the open constraints on it.
    if now > checkout.expires_at:  # the merchant's own clock set it: no skew to allow for
        raise _invalid("the checkout of this round has expired")
    closed = checkout_mandate.closed_claims
    if closed.get("checkout_jwt") != checkout.jwt:
        raise _invalid("the checkout mandate is not for the checkout of this round")
    if closed.get("checkout_hash") != checkout.hash:
        raise _invalid("the checkout mandate's checkout_hash is not the hash of its checkout")
    check_checkout_mandate(checkout_mandate, checkout_jwt=checkout.jwt)
    # 4. The payment: this checkout, this merchant, its total, and the payment beside the mandates.
    amount, currency = _check_payment_binding(payment_mandate.closed_claims, payment, declaration, checkout)
    # 5. The open payment mandate's constraints, against the merchant's record of it.
    record = await usage(payment_mandate.open_key)
    accepted = AcceptedMandates(
        checkout=checkout_mandate,
        payment=payment_mandate,
        checkout_hash=checkout.hash,
        checkout_id=checkout.id,
        open_mandate=payment_mandate.open_key,
        payment_reference=payment_mandate.closed_reference,
        amount=amount,
        currency=currency,
    )
    accepted.check_usage(record)
    return accepted


def _verify_chains(
    mandates: Ap2Mandates, issuers: IssuerKeys, merchant_id: str, nonce: str, now: int, clock_skew_s: int
) -> tuple[VerifiedMandate, VerifiedMandate]:
    """Step 1 for both chains (on a worker thread: the SDK's signature checks are CPU work)."""

    def verify(kind: MandateKind, token: str) -> VerifiedMandate:
        return verify_mandate(
            kind, token, issuers, audience=merchant_id, nonce=nonce, now=now, clock_skew_s=clock_skew_s
        )

    return (
        verify(MandateKind.CHECKOUT, mandates.checkout_mandate),
        verify(MandateKind.PAYMENT, mandates.payment_mandate),
    )


def _check_payment_binding(
    closed: Mapping[str, Any],
    payment: _Payment,
    declaration: Ap2Declaration,
    checkout: _Checkout,
) -> tuple[int, str]:
    """§20.5 step 4: the closed payment mandate's claims against the checkout and the payment; the amount
    and currency it counts."""
    if closed.get("transaction_id") != checkout.hash:
        raise _invalid("the payment mandate's transaction_id is not this round's checkout")
    if closed.get("payee") != declaration.merchant.to_wire():
        raise _invalid("the payment mandate's payee is not this merchant")
    paid = closed.get("payment_amount")
    amount = paid.get("amount") if isinstance(paid, Mapping) else None
    currency = paid.get("currency") if isinstance(paid, Mapping) else None
    if (
        isinstance(amount, bool)
        or not isinstance(amount, int)
        or (amount, currency) != (checkout.total, checkout.currency)
    ):
        total = f"{checkout.total} {checkout.currency}"
        raise _invalid(f"the payment mandate's amount is not the checkout's total of {total}")
    instrument = closed.get("payment_instrument")
    if not isinstance(instrument, Mapping) or instrument.get("type") != _INSTRUMENT_TYPE:
        raise _invalid("the payment mandate's instrument is not of type x402")
    if not _names_payer(instrument.get("id"), payment):
        raise _invalid("the payment mandate's instrument is not the account paying (network and payer)")
    offer_id = (payment.accepted.extra or {}).get("offerId")
    if offer_id != checkout.id:
        raise _invalid("the payment is not for this round's checkout (offerId)")
    try:
        presented = payload_hash(payment.to_json_dict())
    except ExtensionMetadataError:
        raise _invalid("the payment has no RFC 8785 form to hash") from None
    if instrument.get("payload_hash") != presented:
        raise _invalid("the payment mandate names another payment (payload_hash)")
    return amount, str(currency)


def _names_payer(instrument_id: object, payment: _Payment) -> bool:
    """Whether a CAIP-10 ``instrument_id`` is the network of ``accepted`` and the authorization's signer
    (the address in any case: CAIP-10 does not fix it, and the payer may write it checksummed or not)."""
    if not isinstance(instrument_id, str):
        return False
    network, _, address = instrument_id.rpartition(":")
    return (
        network == payment.accepted.network
        and _ADDRESS.fullmatch(address) is not None
        and address.lower() == signer_of(payment).payer.lower()
    )


def _read_checkout(jwt: str) -> _Checkout:
    """The claims of the round's checkout that the verification needs. The JWT is the merchant's own, as
    stored: it is read, not verified.

    Raises:
        StoredCheckoutError: it is not a checkout this merchant signs.
    """
    parts = jwt.split(".") if isinstance(jwt, str) and jwt.isascii() else []
    if len(parts) != 3:
        raise StoredCheckoutError("the stored checkout is not a compact JWS")
    try:
        claims = json.loads(b64url_decode(parts[1]))
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError among them
        raise StoredCheckoutError("the stored checkout's claims are not base64url JSON") from None
    if not isinstance(claims, dict):
        raise StoredCheckoutError("the stored checkout's claims are not an object")
    listed = claims.get("totals")
    listed = listed if isinstance(listed, list) else []
    totals = [t for t in listed if isinstance(t, dict) and t.get("type") == "total"]
    checkout_id, currency = claims.get("id"), claims.get("currency")
    total = totals[0].get("amount") if len(totals) == 1 else None
    expires = claims.get("exp")
    if (
        not isinstance(checkout_id, str)
        or not checkout_id
        or not isinstance(currency, str)
        or not _whole(total)
        or not _whole(expires)
    ):
        raise StoredCheckoutError("the stored checkout lacks its id, its one total, its currency or its exp")
    return _Checkout(jwt, ap2_digest(jwt), checkout_id, total, currency, expires)


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _invalid(detail: str) -> MandateRefused:
    return MandateRefused(Ap2ErrorCode.INVALID_MANDATE, detail)
