"""The catalogue's checks of the embedded flow (§20): a merchant that declares ``params.ap2`` offers signed
checkouts beside its terms and takes payments with AP2 mandates bound to them. They run for the tenants the
declaration names, and are skipped, saying so, elsewhere; the checks that present mandates need an issuer key
the merchant trusts (``--ap2-issuer-key``) and the AP2 SDK. ``_catalogue.CHECKS`` lists them last."""

from __future__ import annotations

from ._check_spec import CheckSpec, Level, Scope
from ._check_spec import make_check as _c

__all__ = ["AP2_CATALOGUE"]

_M, _S, _CARD, _V10 = Level.MUST, Level.SHOULD, Scope.CARD, Scope.A2A_1_0

AP2_CATALOGUE: tuple[CheckSpec, ...] = (
    _c(
        "ap2.declaration",
        _M,
        _CARD,
        "20.2",
        "params.ap2 validates against schema/ap2.json, names only tenants the card serves, and each jwksUrl "
        "answers a JWK Set of ES256 P-256 keys.",
    ),
    _c(
        "ap2.checkout-offered",
        _M,
        _V10,
        "20.3",
        "A declared tenant's payment-required task carries the ap2-checkout artifact: its name, the URI, and "
        "one data part holding the checkout JWT.",
    ),
    _c(
        "ap2.checkout-signed",
        _M,
        _V10,
        "20.3",
        "The checkout JWT verifies with a jwksUrl key; its claims validate, id is the offerId, x402 is "
        "required, merchant is the declaration's, and the amounts keep the price rule.",
    ),
    _c(
        "ap2.checkout-replaced",
        _M,
        _V10,
        "20.3",
        "Fresh terms (T15) replace the checkout: still one ap2-checkout artifact, whose new checkout names "
        "the new offerId.",
    ),
    _c(
        "ap2.checkout-not-work",
        _M,
        _V10,
        "20.3",
        "The checkout is the only artifact of an unpaid task, also after a refused payment (§7.3 rule 4 "
        "still holds for everything else); nothing moves.",
    ),
    _c(
        "ap2.paid-with-mandates",
        _M,
        _V10,
        "20.6",
        "A payment with good mandates completes the task, settled on chain, and the status carries success "
        "receipts that verify and reference the closed mandates.",
    ),
    _c(
        "ap2.binding-payload",
        _M,
        _V10,
        "20.5",
        "A payment mandate naming another payment (payload_hash) is refused with InvalidParamsError and "
        "invalid_mandate; the task is unchanged, nothing moves.",
    ),
    _c(
        "ap2.binding-checkout",
        _M,
        _V10,
        "20.5",
        "Mandates closing another round's checkout are refused with InvalidParamsError and invalid_mandate; "
        "nothing moves.",
    ),
    _c(
        "ap2.binding-round",
        _M,
        _V10,
        "20.4",
        "Closing hops with another aud or nonce are refused with InvalidParamsError and invalid_credential; "
        "nothing moves.",
    ),
    _c(
        "ap2.issuer-untrusted",
        _M,
        _V10,
        "20.1",
        "Mandates issued by a key the merchant does not trust are refused with invalid_credential; nothing "
        "moves.",
    ),
    _c(
        "ap2.budget",
        _M,
        _V10,
        "20.6",
        "An open mandate whose budget the price exceeds is refused with invalid_mandate and error receipts "
        "that verify; nothing moves.",
    ),
    _c(
        "ap2.unknown-constraint",
        _M,
        _V10,
        "20.6",
        "An open mandate with a constraint of unknown type is refused with unresolved_constraint; nothing "
        "moves.",
    ),
    _c(
        "ap2.required",
        _M,
        _V10,
        "20.5",
        "A tenant declared required: true refuses a payment without mandates with invalid_mandate, the task "
        "unchanged; nothing moves.",
    ),
    _c(
        "ap2.refused-then-paid",
        _S,
        _V10,
        "20.5",
        "After mandates are refused, the same payment with good mandates completes the task.",
    ),
)
"""The ``ap2.*`` rows, in the order the kit reports them."""
