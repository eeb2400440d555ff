"""The payer's one door to the AP2 SDK (`ap2`): the user's open mandates closed over one payment (§20.4).

``present_mandates`` turns the user's open checkout and payment mandates into the closed mandates of one
round: the agent signs each closing hop with the key the open mandates confirm (``cnf``), bound to the
tenant's ``merchant.id`` (``aud``) and the checkout ``id`` (``nonce``); the checkout mandate names the
checkout JWT by its hash, and the payment mandate names that checkout (``transaction_id``) and the x402
payment (``payload_hash``). Before anything is signed the open mandates' constraints are checked here,
against the payer's own record of what it presented under them, so that a payment the user did not allow
is refused with a ``MandateConstraintError`` instead of being refused by the merchant.

The SDK is imported on first use, its file log pointed at ``os.devnull`` first: it appends whole
presentation tokens to a file inside its install; and the ``sd_jwt`` logger, which logs disclosed claim
values at DEBUG, is held at INFO. The merchant's wrapper does the same two lines; a
shared helper would be a third importer of the SDK, which ``tests/merchant/ap2/test_sdk_imports.py``
forbids, and no package both sides may import is the place for an SDK loader. No SDK type leaves this
module, and the agent's private key is never put in a message or a ``repr``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from functools import cache
from typing import Any, NamedTuple

from a2a_x402.extension import Ap2Mandates, Ap2Merchant, ExtensionMetadataError, ap2_digest, payload_hash
from a2a_x402.observability import drop_debug_lines

from ._ap2_constraints import (
    BUDGET_SCALE as _BUDGET_SCALE,
)
from ._ap2_constraints import (
    allowed_for_checkout,
    allowed_for_payment,
    check_checkout,
    check_payment,
    check_times,
    checkout_total,
    constraints,
    paying_account,
    with_tilde,
)
from ._ap2_tokens import OpenToken, jwt_claims
from ._ap2_usage import MandateUsage, MandateUsageMemory, MandateUse, usage_key
from ._errors import MandateConstraintError

__all__ = [
    "OpenMandates",
    "PreparedMandates",
    "TestIssue",
    "issue_test_mandates",
    "prepare_mandates",
    "present_mandates",
]

_CHECKOUT_OPEN_VCT = "mandate.checkout.open.1"
_PAYMENT_OPEN_VCT = "mandate.payment.open.1"
_INSTRUMENT_TYPE = "x402"


class _Sdk(NamedTuple):
    client: Any
    jwk: Any
    checkout_mandate: Any
    payment_mandate: Any


@cache
def _sdk() -> _Sdk:
    """The SDK's parts, imported once, with its file log turned off before anything of it runs."""
    try:
        import ap2.sdk.mandate as mandate
    except ImportError:
        raise MandateConstraintError(
            "sdk", "the AP2 SDK is not installed (scripts/setup installs it)"
        ) from None
    mandate.LOG_FILE_PATH = os.devnull
    # The SD-JWT library it builds on logs every claim it discloses at DEBUG, values included: a
    # mandate's content never reaches a log line, whatever level the caller asks for.
    drop_debug_lines("sd_jwt")
    import jwcrypto.jwk as jwk
    from ap2.sdk.generated.checkout_mandate import CheckoutMandate
    from ap2.sdk.generated.payment_mandate import PaymentMandate
    from ap2.sdk.generated.types.payment_instrument import PaymentInstrument

    # The SDK's instrument model drops members it does not name, and §20.4's `payload_hash` is one.
    class X402Instrument(PaymentInstrument):  # type: ignore[misc]
        payload_hash: str

    class X402PaymentMandate(PaymentMandate):  # type: ignore[misc]
        payment_instrument: X402Instrument

    return _Sdk(mandate.MandateClient(), jwk, CheckoutMandate, X402PaymentMandate)


@dataclass(slots=True)
class OpenMandates:
    """The user's open mandates (issued by a Trusted Surface) and the agent key their ``cnf`` confirms.

    Attributes:
        checkout: the open checkout mandate (``mandate.checkout.open.1``), SD-JWT as issued.
        payment: the open payment mandate (``mandate.payment.open.1``), SD-JWT as issued.
        agent_key: the agent's private EC P-256 JWK (its members as a mapping).
        usage: (given only) where the payer counts what it presents under the open payment mandate (the
            sum of the ``payment_amount``s in minor units and their number), which its budget and
            recurrence limit are checked against: ``usage_record``; by default a record in memory of this
            object's own (a ``dataclasses.replace`` copy starts a new one), or a ``MandateUsageFile``
            shared across objects, runs and processes.

    None of the three credentials is ever shown (``repr`` included).
    """

    # Credentials, as the key is: a repr (in a traceback, a log line) shows none of them.
    checkout: str = field(repr=False)
    payment: str = field(repr=False)
    agent_key: Mapping[str, str] = field(repr=False)
    usage: InitVar[MandateUsage | None] = None
    _record: MandateUsage = field(default_factory=MandateUsageMemory, init=False, repr=False, compare=False)

    def __post_init__(self, usage: MandateUsage | None) -> None:
        if usage is not None:
            self._record = usage

    @property
    def usage_record(self) -> MandateUsage:
        """Where the uses of the open payment mandate are counted."""
        return self._record

    @property
    def usage_key(self) -> str:
        """The key of the open payment mandate's record: the hash of its issuer-signed JWT."""
        return usage_key(self.payment)

    @property
    def spent(self) -> int:
        """What counts under the open payment mandate, in minor units of its currency."""
        return self._record.spent(self.usage_key).total

    @property
    def uses(self) -> int:
        """How many payments count under the open payment mandate."""
        return self._record.spent(self.usage_key).uses


@dataclass(slots=True)
class PreparedMandates:
    """The open mandates checked against one checkout, their use reserved, ready to close over the payment.

    ``close`` signs the closed mandates; ``use`` is the reservation the caller confirms or releases once
    the round's outcome is known (and releases when ``close`` fails).
    """

    open_mandates: OpenMandates = field(repr=False)
    checkout_jwt: str = field(repr=False)
    merchant: Mapping[str, Any]
    nonce: str
    amount: tuple[int, str]
    instrument_id: str
    use: MandateUse
    _checkout_token: str = field(repr=False)
    _payment_token: str = field(repr=False)

    def close(self, payment_payload: Mapping[str, Any]) -> Ap2Mandates:
        """The closed mandates of the round for ``payment_payload`` (the ``payload`` member of the
        ``payment-submitted`` extension object, wire form): the data part of §20.4 (``to_wire()``).

        Raises:
            MandateConstraintError: the payment is not of the checkout's terms or of the checked payer, has
                no RFC 8785 form, or the SDK cannot sign; nothing was presented (the use stays reserved:
                the caller releases it).
        """
        accepted = payment_payload.get("accepted")
        extra = accepted.get("extra") if isinstance(accepted, Mapping) else None
        if not isinstance(extra, Mapping) or extra.get("offerId") != self.nonce:
            raise MandateConstraintError("payment", "the payment is not of the checkout's terms (offerId)")
        if paying_account(payment_payload) != self.instrument_id:
            raise MandateConstraintError("payment", "the payment is not from the wallet checked")
        try:
            paid_hash = payload_hash(payment_payload)
        except ExtensionMetadataError:
            raise MandateConstraintError("payment", "the payment has no RFC 8785 form to hash") from None
        merchant_id = str(self.merchant.get("id"))
        return _close(
            self.open_mandates,
            self._checkout_token,
            self._payment_token,
            checkout_jwt=self.checkout_jwt,
            payee=self.merchant,
            amount=self.amount,
            instrument={"id": self.instrument_id, "type": _INSTRUMENT_TYPE, "payload_hash": paid_hash},
            merchant_id=merchant_id,
            nonce=self.nonce,
        )


def present_mandates(
    open_mandates: OpenMandates,
    checkout_jwt: str,
    payment_payload: Mapping[str, Any],
    merchant_id: str,
    nonce: str,
    *,
    now: int,
) -> Ap2Mandates:
    """The closed mandates of one round, as the mandates data part of §20.4 (``to_wire()``).

    ``checkout_jwt`` is the checkout JWT of the task's ``ap2-checkout`` artifact (already verified
    against the tenant's checkout keys by the caller), ``payment_payload`` the ``payload`` member of the
    ``payment-submitted`` extension object (the signed x402 payment, wire form), ``merchant_id`` the
    tenant's ``merchant.id`` and ``nonce`` the checkout ``id``. The open mandates' constraints are
    checked at ``now`` (unix seconds) first; the payment is then counted against the open payment
    mandate's budget (a reservation ``prepare_mandates`` returns, which this shorthand leaves counted).

    Raises:
        MandateConstraintError: the payment is outside what the open mandates allow (amount range, payee,
            budget, occurrences, instrument, merchant, expiry), the checkout or payment cannot be closed
            over them, or the SDK is missing; no mandate was signed, nothing was counted.
    """
    prepared = prepare_mandates(
        open_mandates, checkout_jwt, merchant_id, nonce, paying_account(payment_payload), now=now
    )
    try:
        return prepared.close(payment_payload)
    except BaseException:
        prepared.use.release()
        raise


def prepare_mandates(
    open_mandates: OpenMandates,
    checkout_jwt: str,
    merchant_id: str,
    nonce: str,
    instrument_id: str,
    *,
    now: int,
) -> PreparedMandates:
    """Check the open mandates against the checkout and the paying account, and reserve their use.

    Called before the payment is signed: ``instrument_id`` is the paying account as CAIP-10 (the network
    of the entry to pay, ``:``, the payer's address). The arguments are those of ``present_mandates``.

    Raises:
        MandateConstraintError: as ``present_mandates``; nothing was counted.
    """
    checkout = jwt_claims(checkout_jwt, "the checkout JWT")
    if checkout.get("id") != nonce:
        raise MandateConstraintError("nonce", "the nonce is not the checkout's id")
    merchant = checkout.get("merchant")
    if not isinstance(merchant, dict) or merchant.get("id") != merchant_id:
        raise MandateConstraintError("merchant", "the checkout's merchant is not the tenant's merchant")
    amount = checkout_total(checkout)
    open_checkout = OpenToken.read(open_mandates.checkout, _CHECKOUT_OPEN_VCT, "checkout")
    open_payment = OpenToken.read(open_mandates.payment, _PAYMENT_OPEN_VCT, "payment")
    for opened in (open_checkout, open_payment):
        check_times(opened, now)
    check_checkout(open_checkout, merchant_id)
    # The open payment mandate names the open checkout mandate by the hash of the form presented: when it
    # does, that form is the one it was issued in, and only the payment mandate is trimmed.
    checkout_presented = open_checkout.token
    references = constraints(open_payment, "payment.reference")
    if not references:
        checkout_presented = open_checkout.trimmed(
            lambda kind, value: allowed_for_checkout(kind, value, merchant_id)
        )
    payment_presented = open_payment.trimmed(
        lambda kind, value: allowed_for_payment(kind, value, merchant_id, instrument_id)
    )
    for reference in references:
        if reference.get("conditional_transaction_id") != ap2_digest(with_tilde(checkout_presented)):
            raise MandateConstraintError("payment.reference", "the open mandates do not belong together")
    _sdk()  # a missing SDK refuses before anything is counted
    use = open_mandates.usage_record.reserve(
        open_mandates.usage_key,
        amount[0],
        lambda spent: check_payment(open_payment, amount, merchant_id, instrument_id, spent),
    )
    return PreparedMandates(
        open_mandates,
        checkout_jwt,
        merchant,
        nonce,
        amount,
        instrument_id,
        use,
        checkout_presented,
        payment_presented,
    )


def _close(
    open_mandates: OpenMandates,
    checkout_token: str,
    payment_token: str,
    *,
    checkout_jwt: str,
    payee: Mapping[str, Any],
    amount: tuple[int, str],
    instrument: Mapping[str, str],
    merchant_id: str,
    nonce: str,
) -> Ap2Mandates:
    sdk = _sdk()
    agent_key = open_mandates.agent_key
    if (agent_key.get("kty"), agent_key.get("crv")) != ("EC", "P-256") or "d" not in agent_key:
        raise MandateConstraintError("agent_key", "the agent key is not an EC P-256 private JWK")
    try:
        key = sdk.jwk.JWK(**dict(agent_key))
        key.get_op_key("sign")  # builds the key: a point off the curve fails here, not inside the SDK
    except Exception:  # jwcrypto and cryptography raise several types; none may repeat the key
        raise MandateConstraintError(
            "agent_key", "the agent key is not a usable EC P-256 private JWK"
        ) from None
    checkout_hash = ap2_digest(checkout_jwt)
    closed_checkout = sdk.checkout_mandate(checkout_jwt=checkout_jwt, checkout_hash=checkout_hash)
    closed_payment = sdk.payment_mandate(
        transaction_id=checkout_hash,
        payee=dict(payee),
        payment_amount={"amount": amount[0], "currency": amount[1]},
        payment_instrument=dict(instrument),
    )
    try:
        checkout_mandate = sdk.client.present(
            key, checkout_token, [closed_checkout], nonce=nonce, aud=merchant_id
        )
        payment_mandate = sdk.client.present(
            key, payment_token, [closed_payment], nonce=nonce, aud=merchant_id
        )
    except Exception as exc:  # the SDK's own words are about the token's form, never the key
        raise MandateConstraintError(
            "sdk", f"the SDK could not close the mandates: {type(exc).__name__}"
        ) from None
    return Ap2Mandates(checkout_mandate=checkout_mandate, payment_mandate=payment_mandate)


@dataclass(frozen=True, slots=True)
class TestIssue:
    """Open mandates issued for trying things out (``issue_test_mandates``).

    Attributes:
        mandates: the open mandates and the fresh agent key they confirm.
        issuer_jwks: the public JWK Set of the throwaway "user" key that signed them: what a merchant
            is told to trust as an issuer of the tenant. Its private part is not kept anywhere.
    """

    mandates: OpenMandates = field(repr=False)
    issuer_jwks: Mapping[str, Any]


def issue_test_mandates(
    merchant: Ap2Merchant, *, budget: int, max_amount: int, currency: str, lifetime_s: int, now: int
) -> TestIssue:
    """Open checkout and payment mandates for ``merchant``, signed by a throwaway "user" key made here, for
    a fresh agent key: at most ``max_amount`` a payment and ``budget`` in all (minor units of
    ``currency``, whose minor unit must be a hundredth: the SDK's budget is in major units), valid for
    ``lifetime_s`` from ``now``. For tests and trying things out only: no person consented to them.

    Raises:
        MandateConstraintError: the SDK is missing, or the amounts are not whole hundredths.
    """
    sdk = _sdk()
    if budget < 0 or max_amount < 0:
        raise MandateConstraintError("issue", "amounts are not negative")
    from ap2.sdk.generated.open_checkout_mandate import AllowedMerchants, OpenCheckoutMandate
    from ap2.sdk.generated.open_payment_mandate import (
        AllowedPayees,
        AmountRange,
        Budget,
        OpenPaymentMandate,
        PaymentReference,
    )

    made = sdk.jwk.JWK.generate(kty="EC", crv="P-256")
    user = sdk.jwk.JWK(**json.loads(made.export_private()), kid=made.thumbprint())
    agent = sdk.jwk.JWK.generate(kty="EC", crv="P-256")
    cnf = {"jwk": json.loads(agent.export_public())}
    times = {"iat": now, "exp": now + lifetime_s}
    allowed = [merchant.to_wire()]
    checkout = OpenCheckoutMandate(constraints=[AllowedMerchants(allowed=allowed)], cnf=cnf, **times)
    checkout_token: str = sdk.client.create([checkout], user)
    payment = OpenPaymentMandate(
        constraints=[
            AmountRange(currency=currency, min=0, max=max_amount),
            AllowedPayees(allowed=allowed),
            PaymentReference(conditional_transaction_id=ap2_digest(checkout_token)),
            Budget(max=budget / _BUDGET_SCALE, currency=currency),
        ],
        cnf=cnf,
        **times,
    )
    payment_token: str = sdk.client.create([payment], user)
    mandates = OpenMandates(
        checkout=checkout_token, payment=payment_token, agent_key=json.loads(agent.export_private())
    )
    return TestIssue(mandates, {"keys": [dict(json.loads(user.export_public()), alg="ES256", use="sig")]})
