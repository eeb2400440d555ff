"""The one door to the AP2 SDK (`ap2`): mandate chains verified, answers as our types, errors as ours.

The SDK is imported on first use, never at module import, so that a merchant without a tenant in the
embedded flow does not need it (it is on no registry: scripts/setup installs it from a snapshot). Before
anything of it runs, its file log is pointed at ``os.devnull``: the SDK appends every operation, whole
presentation tokens among them, to a file inside its install, which would put credentials in a log and
fails on a read-only install.

What the SDK raises (``ValueError`` and the JOSE library's errors) and the violation strings its chain
classes return become ``MandateRefused`` with the ``ap2Error`` code of §20.6. No SDK type leaves this
module: the chains it parsed are kept opaque inside ``VerifiedMandate``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from types import ModuleType
from typing import Any, NamedTuple, get_args

from pydantic import ValidationError

from a2a_x402.extension import Ap2ErrorCode, ap2_digest
from a2a_x402.observability import drop_debug_lines

__all__ = [
    "IssuerKeys",
    "MandateKind",
    "MandateRefused",
    "MandateUsage",
    "VerifiedMandate",
    "ap2_sdk_available",
    "check_checkout_mandate",
    "check_payment_mandate",
    "verify_mandate",
]

# A chain of the embedded flow is the user's open mandate and the closed one the agent signed over it.
_CHAIN_HOPS = 2
_MAX_DETAIL_CHARS = 200
# Long base64url runs in an SDK message are token material: never repeated in a refusal or a log.
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_.~-]{40,}")


class MandateKind(StrEnum):
    """Which of the two mandates of §20.4 a chain is."""

    CHECKOUT = "checkout"
    PAYMENT = "payment"


class MandateRefused(Exception):
    """Mandates that do not authorize the payment: ``code`` is the ``ap2Error`` of §20.6.

    Attributes:
        code: the AP2 error code the refusal carries.
        detail: one line for people, free of token material.
    """

    def __init__(self, code: Ap2ErrorCode, detail: str) -> None:
        self.code = code
        self.detail = _one_line(detail)
        super().__init__(f"{code.value}: {self.detail}")


class _Sdk(NamedTuple):
    mandate: ModuleType
    checkout_chain: ModuleType
    payment_chain: ModuleType
    constraints: ModuleType
    jwk: ModuleType
    open_checkout_mandate: Any
    open_payment_mandate: Any


@cache
def _sdk() -> _Sdk:
    """The SDK's modules, imported once, with its file log turned off before anything of it runs."""
    try:
        import ap2.sdk.mandate as mandate
    except ImportError:
        raise MandateRefused(
            Ap2ErrorCode.MANDATES_NOT_SUPPORTED, "the AP2 SDK is not installed (scripts/setup installs it)"
        ) from None
    mandate.LOG_FILE_PATH = os.devnull
    drop_debug_lines("sd_jwt")  # it logs each claim a mandate discloses at DEBUG, values included
    import ap2.sdk.checkout_mandate_chain as checkout_chain
    import ap2.sdk.constraints as constraints
    import ap2.sdk.payment_mandate_chain as payment_chain
    import jwcrypto.jwk as jwk
    from ap2.sdk.generated.open_checkout_mandate import OpenCheckoutMandate
    from ap2.sdk.generated.open_payment_mandate import OpenPaymentMandate

    return _Sdk(
        mandate, checkout_chain, payment_chain, constraints, jwk, OpenCheckoutMandate, OpenPaymentMandate
    )


def ap2_sdk_available() -> bool:
    """Whether the AP2 SDK can be imported (a tenant in the embedded flow needs it)."""
    try:
        _sdk()
    except MandateRefused:
        return False
    return True


@dataclass(frozen=True, slots=True)
class IssuerKeys:
    """The issuer keys a merchant trusts for a tenant (§20.1), public JWKs by their ``kid``."""

    by_kid: Mapping[str, Mapping[str, Any]]

    @classmethod
    def from_jwks(cls, jwks: Mapping[str, Any]) -> IssuerKeys:
        """Read a JWK Set: every key an EC P-256 public key with a ``kid`` of its own.

        Raises:
            ValueError: not a JWK Set of such keys, a private key among them, or a ``kid`` used twice.
        """
        keys = jwks.get("keys")
        if not isinstance(keys, list) or not keys:
            raise ValueError("an issuer JWK Set needs a non-empty array of keys")
        by_kid: dict[str, Mapping[str, Any]] = {}
        for index, key in enumerate(keys):
            if not isinstance(key, Mapping) or (key.get("kty"), key.get("crv")) != ("EC", "P-256"):
                raise ValueError(f"issuer key {index} is not an EC P-256 key")
            kid = key.get("kid")
            if not isinstance(kid, str) or not kid or kid in by_kid:
                raise ValueError(f"issuer key {index} needs a kid of its own")
            if "d" in key:
                raise ValueError(f"issuer key {kid!r} is a private key; give only the public part")
            by_kid[kid] = dict(key)
        return cls(by_kid)


@dataclass(frozen=True, slots=True)
class MandateUsage:
    """What a merchant has accepted under one open payment mandate (§20.5 step 5).

    ``total`` is in minor units of the mandate's currency, ``last_used`` in unix seconds.
    """

    total: int = 0
    uses: int = 0
    last_used: int | None = None


@dataclass(frozen=True, slots=True)
class VerifiedMandate:
    """A mandate chain whose signatures, bindings and times verified (§20.5 step 1).

    Attributes:
        kind: checkout or payment.
        open_claims: the open mandate's claims, disclosures resolved.
        closed_claims: the closed mandate's claims as signed (``payment_instrument.payload_hash`` kept,
            which the SDK's typed model drops).
        open_hash: the hash of the open mandate as presented: what a ``payment.reference`` names.
        open_key: the hash of the open mandate's issuer-signed JWT, the same whatever is disclosed: the
            key of the merchant's usage record.
        closed_reference: the hash of the closed mandate's issuer-signed JWT: a receipt's ``reference``.
    """

    kind: MandateKind
    open_claims: Mapping[str, Any]
    closed_claims: Mapping[str, Any]
    open_hash: str
    open_key: str
    closed_reference: str
    _chain: object = field(repr=False, compare=False)


def verify_mandate(
    kind: MandateKind,
    token: str,
    issuers: IssuerKeys,
    *,
    audience: str,
    nonce: str,
    now: int,
    clock_skew_s: int = 300,
) -> VerifiedMandate:
    """Verify a mandate chain as AP2 prescribes: the root with a trusted issuer key, the closing hop with
    the key the open mandate confirms, bound to ``audience`` (the tenant's ``merchant.id``) and ``nonce``
    (the checkout ``id``), every ``iat``/``exp`` against ``now`` within ``clock_skew_s``.

    Raises:
        MandateRefused: ``invalid_credential`` for anything that does not verify (an untrusted issuer
            among them); ``mandates_not_supported`` for a mandate of another type or form than §20.4's
            open-and-closed chain; ``unresolved_constraint`` for a constraint type the SDK does not know;
            ``invalid_mandate`` for claims that verify but do not have the mandate's form.
    """
    if not audience or not nonce:
        raise ValueError("a mandate is verified for an audience and a nonce")
    sdk = _sdk()
    if not token.isascii():
        raise MandateRefused(Ap2ErrorCode.INVALID_CREDENTIAL, f"the {kind} mandate is not an SD-JWT")
    segments = token.split("~~")
    if len(segments) != _CHAIN_HOPS:
        raise MandateRefused(
            Ap2ErrorCode.MANDATES_NOT_SUPPORTED,
            f"the {kind} mandate is not an open mandate and its closed one ({len(segments)} SD-JWTs);"
            " directly signed mandates are not taken",
        )
    try:
        payloads = sdk.mandate.MandateClient().verify(
            token,
            _key_provider(issuers, sdk),
            expected_aud=audience,
            expected_nonce=nonce,
            clock_skew_seconds=clock_skew_s,
            current_time=now,
        )
    except MandateRefused:
        raise
    except Exception as exc:  # the SDK and jwcrypto raise many types: each means "does not verify"
        raise MandateRefused(
            Ap2ErrorCode.INVALID_CREDENTIAL, f"the {kind} mandate does not verify: {exc}"
        ) from None
    if not isinstance(payloads, list) or len(payloads) != _CHAIN_HOPS:
        raise MandateRefused(
            Ap2ErrorCode.MANDATES_NOT_SUPPORTED,
            f"the {kind} mandate does not disclose one mandate per SD-JWT",
        )
    chain_class = (
        sdk.checkout_chain.CheckoutMandateChain
        if kind is MandateKind.CHECKOUT
        else sdk.payment_chain.PaymentMandateChain
    )
    open_model = sdk.open_checkout_mandate if kind is MandateKind.CHECKOUT else sdk.open_payment_mandate
    _refuse_unknown_constraints(kind, payloads[0], open_model)
    try:
        chain = chain_class.parse(payloads)
    except ValidationError as exc:
        raise MandateRefused(
            _form_error_code(exc), f"the {kind} mandate is not of the form of §20.4: {_first(exc)}"
        ) from None
    open_segment = segments[0] if segments[0].endswith("~") else segments[0] + "~"
    return VerifiedMandate(
        kind=kind,
        open_claims=payloads[0],
        closed_claims=payloads[1],
        open_hash=ap2_digest(open_segment),
        open_key=ap2_digest(open_segment.split("~", 1)[0]),
        closed_reference=ap2_digest(segments[1].split("~", 1)[0]),
        _chain=chain,
    )


def check_checkout_mandate(mandate: VerifiedMandate, *, checkout_jwt: str) -> None:
    """§20.5 steps 2 and 3 as the SDK sees them: the closed mandate names ``checkout_jwt`` (the checkout of
    the current round) by its hash, and the open mandate's constraints hold for that checkout.

    Raises:
        MandateRefused: ``invalid_mandate`` with the first violation, ``unresolved_constraint`` for a
            constraint the SDK cannot evaluate.
    """
    _expect(mandate, MandateKind.CHECKOUT)
    _refuse_violations(
        mandate,
        lambda chain: chain.verify(
            expected_checkout_hash=ap2_digest(checkout_jwt), checkout_jwt=checkout_jwt
        ),
    )


def check_payment_mandate(
    mandate: VerifiedMandate, *, transaction_id: str, open_checkout_hash: str, usage: MandateUsage
) -> None:
    """§20.5 steps 4 (``transaction_id``) and 5 as the SDK sees them: the open payment mandate's constraints,
    ``payment.reference`` against ``open_checkout_hash`` and the budget and recurrence against ``usage``.

    The bindings the SDK does not check (payee, amount, the instrument against the x402 payment) are the
    caller's.

    Raises:
        MandateRefused: ``invalid_mandate`` with the first violation, ``unresolved_constraint`` for a
            constraint the SDK cannot evaluate.
    """
    _expect(mandate, MandateKind.PAYMENT)
    sdk = _sdk()
    context = sdk.constraints.MandateContext(
        total_amount=usage.total, total_uses=usage.uses, last_used_date=usage.last_used
    )
    _refuse_violations(
        mandate,
        lambda chain: chain.verify(
            expected_transaction_id=transaction_id,
            expected_open_checkout_hash=open_checkout_hash,
            mandate_context=context,
        ),
    )


def _expect(mandate: VerifiedMandate, kind: MandateKind) -> None:
    if mandate.kind is not kind:
        raise ValueError(f"expected a {kind} mandate, got a {mandate.kind} one")


def _refuse_violations(mandate: VerifiedMandate, check: Any) -> None:
    try:
        violations = check(mandate._chain)
    except MandateRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - the client's data: whatever the SDK raises is a refusal
        # The SDK's evaluator factories raise ValueError for a constraint type they have no evaluator for;
        # a constraint whose values they cannot read (a TypeError, a KeyError) cannot be evaluated either.
        raise MandateRefused(
            Ap2ErrorCode.UNRESOLVED_CONSTRAINT,
            f"the open {mandate.kind} mandate cannot be evaluated: {type(exc).__name__}: {exc}",
        ) from None
    if violations:
        raise MandateRefused(
            Ap2ErrorCode.INVALID_MANDATE,
            f"the {mandate.kind} mandate does not authorize this: {violations[0]}",
        )


def _key_provider(issuers: IssuerKeys, sdk: _Sdk) -> Any:
    def issuer_key(parsed: Any) -> Any:
        kid = parsed.header.get("kid")
        key = issuers.by_kid.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise MandateRefused(
                Ap2ErrorCode.INVALID_CREDENTIAL,
                f"the open mandate's issuer key {str(kid)[:64]!r} is not trusted for this tenant",
            )
        return sdk.jwk.JWK(**key)

    return issuer_key


def _refuse_unknown_constraints(kind: MandateKind, opened: Any, open_model: Any) -> None:
    """A constraint of a type the SDK has no model for is ``unresolved_constraint`` (§20.6), not a malformed
    mandate: the SDK's constraint union is not discriminated, so its parse error cannot tell the two apart."""
    vct, known = _open_mandate_form(open_model)
    if (
        not isinstance(opened, Mapping)
        or opened.get("vct") != vct
        or not isinstance(opened.get("constraints"), list)
    ):
        return  # the parse says what is wrong with it
    for constraint in opened["constraints"]:
        kind_of = constraint.get("type") if isinstance(constraint, Mapping) else None
        if isinstance(kind_of, str) and kind_of not in known:
            raise MandateRefused(
                Ap2ErrorCode.UNRESOLVED_CONSTRAINT,
                f"the open {kind} mandate has a constraint this merchant cannot evaluate: {kind_of[:64]!r}",
            )


@cache
def _open_mandate_form(model: Any) -> tuple[str, frozenset[str]]:
    """The ``vct`` of an SDK open mandate model and the ``type`` of each constraint model it knows."""
    vct = str(model.model_fields["vct"].default)
    [member] = get_args(model.model_fields["constraints"].annotation)
    constraints = get_args(member) or (member,)
    known = frozenset(str(get_args(c.model_fields["type"].annotation)[0]) for c in constraints)
    return vct, known


def _form_error_code(exc: ValidationError) -> Ap2ErrorCode:
    """What a pydantic error of the SDK's mandate models means for the client (§20.6)."""
    for error in exc.errors():
        if tuple(error["loc"]) == ("vct",):
            return Ap2ErrorCode.MANDATES_NOT_SUPPORTED
    return Ap2ErrorCode.INVALID_MANDATE


def _first(exc: ValidationError) -> str:
    """The first problem pydantic found, by its place in the claims: ``vct: Input should be ...``."""
    error = exc.errors()[0]
    place = ".".join(str(part) for part in error["loc"])
    return f"{place}: {error['msg']}" if place else error["msg"]


def _one_line(text: str) -> str:
    line = " ".join(_TOKEN_LIKE.sub("…", text).split())
    return line if len(line) <= _MAX_DETAIL_CHARS else line[: _MAX_DETAIL_CHARS - 1] + "…"
