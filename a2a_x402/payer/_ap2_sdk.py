"""The payer's one door to the AP2 SDK (`ap2`): the user's open mandates closed over one payment (§20.4).

``present_mandates`` turns the user's open checkout and payment mandates into the closed mandates of one
round: the agent signs each closing hop with the key the open mandates confirm (``cnf``), bound to the
tenant's ``merchant.id`` (``aud``) and the checkout ``id`` (``nonce``); the checkout mandate names the
checkout JWT by its hash, and the payment mandate names that checkout (``transaction_id``) and the x402
payment (``payload_hash``). Before anything is signed the open mandates' constraints are checked here,
against the payer's own record of what it presented under them, so that a payment the user did not allow
is refused with a ``MandateConstraintError`` instead of being refused by the merchant.

The SDK is imported on first use, its file log pointed at ``os.devnull`` first: it appends whole
presentation tokens to a file inside its install. The merchant's wrapper does the same two lines; a
shared helper would be a third importer of the SDK, which ``tests/merchant/ap2/test_sdk_imports.py``
forbids, and no package both sides may import is the place for an SDK loader. No SDK type leaves this
module, and the agent's private key is never put in a message or a ``repr``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

from a2a_x402.extension import Ap2Mandates, ExtensionMetadataError, ap2_digest, payload_hash

from ._errors import MandateConstraintError

__all__ = ["OpenMandates", "present_mandates"]

_CHECKOUT_OPEN_VCT = "mandate.checkout.open.1"
_PAYMENT_OPEN_VCT = "mandate.payment.open.1"
_INSTRUMENT_TYPE = "x402"
# The SDK's budget evaluator reads `payment.budget.max` in major units and multiplies it by 100; the
# payer counts the same way, so that it refuses exactly what the merchant would.
_BUDGET_SCALE = 100


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


@dataclass(frozen=True, slots=True)
class _Usage:
    total: int = 0
    uses: int = 0


@dataclass(slots=True)
class OpenMandates:
    """The user's open mandates (issued by a Trusted Surface) and the agent key their ``cnf`` confirms.

    Attributes:
        checkout: the open checkout mandate (``mandate.checkout.open.1``), SD-JWT as issued.
        payment: the open payment mandate (``mandate.payment.open.1``), SD-JWT as issued.
        agent_key: the agent's private EC P-256 JWK (its members as a mapping); never shown.

    It also keeps, in memory, what this payer has presented under the open payment mandate (the sum of
    the ``payment_amount``s in minor units and their number), which its budget and recurrence limit
    are checked against.
    """

    checkout: str
    payment: str
    agent_key: Mapping[str, str] = field(repr=False)
    _usage: _Usage = field(default_factory=_Usage, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @property
    def spent(self) -> int:
        """What was presented under the open payment mandate so far, in minor units of its currency."""
        return self._usage.total

    @property
    def uses(self) -> int:
        """How many payments were presented under the open payment mandate so far."""
        return self._usage.uses


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
    mandate's budget.

    Raises:
        MandateConstraintError: the payment is outside what the open mandates allow (amount range, payee,
            budget, occurrences, instrument, merchant, expiry), the checkout or payment cannot be closed
            over them, or the SDK is missing; no mandate was signed, nothing was counted.
    """
    checkout = _jwt_claims(checkout_jwt, "the checkout JWT")
    if checkout.get("id") != nonce:
        raise MandateConstraintError("nonce", "the nonce is not the checkout's id")
    merchant = checkout.get("merchant")
    if not isinstance(merchant, dict) or merchant.get("id") != merchant_id:
        raise MandateConstraintError("merchant", "the checkout's merchant is not the tenant's merchant")
    accepted = payment_payload.get("accepted")
    extra = accepted.get("extra") if isinstance(accepted, Mapping) else None
    if not isinstance(extra, Mapping) or extra.get("offerId") != nonce:
        raise MandateConstraintError("payment", "the payment is not of the checkout's terms (offerId)")
    amount = _checkout_total(checkout)
    instrument_id = _instrument_id(payment_payload)
    try:
        paid_hash = payload_hash(payment_payload)
    except ExtensionMetadataError:
        raise MandateConstraintError("payment", "the payment has no RFC 8785 form to hash") from None
    open_checkout = _OpenToken.read(open_mandates.checkout, _CHECKOUT_OPEN_VCT, "checkout")
    open_payment = _OpenToken.read(open_mandates.payment, _PAYMENT_OPEN_VCT, "payment")
    for opened in (open_checkout, open_payment):
        _check_times(opened, now)
    _check_checkout(open_checkout, merchant_id)
    # The open payment mandate names the open checkout mandate by the hash of the form presented: when it
    # does, that form is the one it was issued in, and only the payment mandate is trimmed.
    checkout_presented = open_checkout.token
    references = _constraints(open_payment, "payment.reference")
    if not references:
        checkout_presented = open_checkout.trimmed(
            lambda kind, value: _allowed_for_checkout(kind, value, merchant_id)
        )
    payment_presented = open_payment.trimmed(
        lambda kind, value: _allowed_for_payment(kind, value, merchant_id, instrument_id)
    )
    with open_mandates._lock:
        usage = open_mandates._usage
        _check_payment(open_payment, amount, merchant_id, instrument_id, usage)
        for reference in references:
            if reference.get("conditional_transaction_id") != ap2_digest(_with_tilde(checkout_presented)):
                raise MandateConstraintError("payment.reference", "the open mandates do not belong together")
        closed = _close(
            open_mandates,
            checkout_presented,
            payment_presented,
            checkout_jwt=checkout_jwt,
            payee=merchant,
            amount=amount,
            instrument={
                "id": instrument_id,
                "type": _INSTRUMENT_TYPE,
                "payload_hash": paid_hash,
            },
            merchant_id=merchant_id,
            nonce=nonce,
        )
        open_mandates._usage = _Usage(usage.total + amount[0], usage.uses + 1)
    return closed


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
class _OpenToken:
    """An open mandate as issued: its token, its claims (disclosures resolved) and its disclosures."""

    token: str
    kind: str
    claims: Mapping[str, Any]
    disclosures: tuple[str, ...]
    # For each disclosure of an element of a constraint's array: the constraint's type and the value.
    elements: Mapping[str, tuple[str, Any]]

    @classmethod
    def read(cls, token: str, vct: str, kind: str) -> _OpenToken:
        """The payer reads its own user's mandate: the signature is the merchant's to check."""
        if not token.isascii():
            raise MandateConstraintError("form", f"the open {kind} mandate is not an SD-JWT")
        jwt, *rest = token.split("~")
        disclosures = tuple(part for part in rest if part)
        values: dict[str, Any] = {}
        for disclosure in disclosures:
            decoded = _b64_json(disclosure, f"a disclosure of the open {kind} mandate")
            if not isinstance(decoded, list) or len(decoded) not in (2, 3):
                raise MandateConstraintError(kind, f"the open {kind} mandate has a malformed disclosure")
            values[ap2_digest(disclosure)] = decoded
        payload = _jwt_claims(jwt, f"the open {kind} mandate")
        items = _resolve(payload.get("delegate_payload"), values)
        mandates = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
        if len(mandates) != 1 or mandates[0].get("vct") != vct:
            raise MandateConstraintError(kind, f"the open {kind} mandate is not a {vct}")
        elements: dict[str, tuple[str, Any]] = {}
        # The mandate as disclosed, its arrays' elements still digests: which disclosure is which element.
        raw_mandate = next(
            (d[-1] for d in values.values() if isinstance(d[-1], dict) and d[-1].get("vct") == vct), {}
        )
        for constraint in raw_mandate.get("constraints", ()):
            if not isinstance(constraint, dict):
                continue
            for array in constraint.values():
                for digest in _placeholders(array):
                    if digest in values:
                        elements[digest] = (str(constraint.get("type")), values[digest][-1])
        by_digest = {ap2_digest(disclosure): disclosure for disclosure in disclosures}
        return cls(token, kind, mandates[0], disclosures, {by_digest[d]: v for d, v in elements.items()})

    def trimmed(self, keep: Callable[[str, Any], bool]) -> str:
        """The token with only the disclosures of constraint elements ``keep(type, value)`` wants."""
        kept = [
            disclosure
            for disclosure in self.disclosures
            if disclosure not in self.elements or keep(*self.elements[disclosure])
        ]
        return self.token.split("~", 1)[0] + "~" + "".join(part + "~" for part in kept)


def _placeholders(value: Any) -> list[str]:
    """The digests of the selectively disclosed elements anywhere under ``value``."""
    if isinstance(value, dict):
        if set(value) == {"..."} and isinstance(value["..."], str):
            return [value["..."]]
        return [digest for item in value.values() for digest in _placeholders(item)]
    if isinstance(value, list):
        return [digest for item in value for digest in _placeholders(item)]
    return []


def _resolve(value: Any, values: Mapping[str, list[Any]]) -> Any:
    """``value`` with its disclosed elements and members in place and undisclosed ones left out."""
    if isinstance(value, list):
        resolved = []
        for item in value:
            if isinstance(item, dict) and set(item) == {"..."}:
                if item["..."] in values:
                    resolved.append(_resolve(values[item["..."]][-1], values))
                continue
            resolved.append(_resolve(item, values))
        return resolved
    if isinstance(value, dict):
        members = {
            key: _resolve(item, values) for key, item in value.items() if key not in ("_sd", "_sd_alg")
        }
        for digest in value.get("_sd", ()):
            decoded = values.get(digest)
            if decoded is not None and len(decoded) == 3:
                members[decoded[1]] = _resolve(decoded[2], values)
        return members
    return value


def _constraints(opened: _OpenToken, kind: str) -> list[Mapping[str, Any]]:
    return [c for c in opened.claims.get("constraints", ()) if isinstance(c, dict) and c.get("type") == kind]


def _check_times(opened: _OpenToken, now: int) -> None:
    expires = opened.claims.get("exp")
    if isinstance(expires, int) and now > expires:
        raise MandateConstraintError("exp", f"the open {opened.kind} mandate has expired")


def _check_checkout(opened: _OpenToken, merchant_id: str) -> None:
    for constraint in _constraints(opened, "checkout.allowed_merchants"):
        if not any(_has_id(allowed, merchant_id) for allowed in constraint.get("allowed", ())):
            raise MandateConstraintError(
                "checkout.allowed_merchants", "the open checkout mandate does not allow this merchant"
            )


def _check_payment(
    opened: _OpenToken, amount: tuple[int, str], merchant_id: str, instrument_id: str, usage: _Usage
) -> None:
    total, currency = amount
    for constraint in opened.claims.get("constraints", ()):
        kind = constraint.get("type") if isinstance(constraint, dict) else None
        if kind == "payment.amount_range":
            low, high = constraint.get("min"), constraint.get("max")
            if (
                constraint.get("currency") != currency
                or (isinstance(low, int) and total < low)
                or (isinstance(high, int) and total > high)
            ):
                raise MandateConstraintError(
                    kind, f"{total} {currency} minor units are outside the allowed amount range"
                )
        elif kind == "payment.allowed_payees":
            if not any(_has_id(allowed, merchant_id) for allowed in constraint.get("allowed", ())):
                raise MandateConstraintError(kind, "the open payment mandate does not allow this payee")
        elif kind == "payment.allowed_payment_instruments":
            if not any(_has_id(allowed, instrument_id) for allowed in constraint.get("allowed", ())):
                raise MandateConstraintError(kind, "the open payment mandate does not allow this wallet")
        elif kind == "payment.budget":
            limit = constraint.get("max")
            if constraint.get("currency") != currency or not isinstance(limit, (int, float)):
                raise MandateConstraintError(kind, f"the budget is not in {currency}")
            budget = int(limit * _BUDGET_SCALE)
            if usage.total + total > budget:
                raise MandateConstraintError(
                    kind,
                    f"{total} more would exceed the budget of {budget} ({usage.total} spent)",
                )
        elif kind == "payment.agent_recurrence":
            most = constraint.get("max_occurrences")
            if isinstance(most, int) and usage.uses >= most:
                raise MandateConstraintError(
                    kind, f"the open payment mandate was used {usage.uses} of {most} times"
                )
        elif kind != "payment.reference":  # checked against the presented checkout mandate
            raise MandateConstraintError(str(kind)[:64], "the payer cannot evaluate this constraint")


def _allowed_for_checkout(kind: str, value: Any, merchant_id: str) -> bool:
    return kind != "checkout.allowed_merchants" or _has_id(value, merchant_id)


def _allowed_for_payment(kind: str, value: Any, merchant_id: str, instrument_id: str) -> bool:
    if kind == "payment.allowed_payees":
        return _has_id(value, merchant_id)
    if kind == "payment.allowed_payment_instruments":
        return _has_id(value, instrument_id)
    return True


def _has_id(value: Any, wanted: str) -> bool:
    return isinstance(value, dict) and value.get("id") == wanted


def _checkout_total(checkout: Mapping[str, Any]) -> tuple[int, str]:
    totals = [t for t in checkout.get("totals", ()) if isinstance(t, dict) and t.get("type") == "total"]
    currency = checkout.get("currency")
    if len(totals) != 1 or not isinstance(totals[0].get("amount"), int) or not isinstance(currency, str):
        raise MandateConstraintError("checkout", "the checkout has no single total in a currency")
    return totals[0]["amount"], currency


def _instrument_id(payment_payload: Mapping[str, Any]) -> str:
    """The paying account as CAIP-10: the network of ``accepted`` and the authorization's ``from``."""
    accepted = payment_payload.get("accepted")
    inner = payment_payload.get("payload")
    network = accepted.get("network") if isinstance(accepted, Mapping) else None
    signed = None
    if isinstance(inner, Mapping):
        signed = inner.get("authorization") or inner.get("permit2Authorization")
    payer = signed.get("from") if isinstance(signed, Mapping) else None
    if not isinstance(network, str) or not isinstance(payer, str):
        raise MandateConstraintError("payment", "the payment names no network and payer")
    return f"{network}:{payer}"


def _with_tilde(token: str) -> str:
    return token if token.endswith("~") else token + "~"


def _jwt_claims(jwt: str, what: str) -> dict[str, Any]:
    parts = jwt.split(".")
    if len(parts) != 3:
        raise MandateConstraintError("form", f"{what} is not a compact JWS")
    claims = _b64_json(parts[1], what)
    if not isinstance(claims, dict):
        raise MandateConstraintError("form", f"{what} has no claims object")
    return claims


def _b64_json(segment: str, what: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError):
        raise MandateConstraintError("form", f"{what} is not base64url JSON") from None
