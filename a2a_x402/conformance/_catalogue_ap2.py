"""The catalogue's checks of the embedded flow (§20): a merchant that declares ``params.ap2`` offers signed
checkouts beside its terms and takes payments with AP2 mandates bound to them. They run for the tenants the
declaration names, and are skipped, saying so, elsewhere; the checks that present mandates need an issuer key
the merchant trusts (``--ap2-issuer-key``) and the AP2 SDK. The ``ap2.v02-*`` checks are those of its v0.2
form on A2A 0.3 (§20.7), for the tenants a 0.3 card's v0.2 declaration lists in ``params.ap2``.
``_catalogue.CHECKS`` lists them last."""

from __future__ import annotations

from ._check_spec import CheckSpec, Level, Scope
from ._check_spec import make_check as _c

__all__ = ["AP2_CATALOGUE"]

_M, _S, _CARD, _V10, _V03 = Level.MUST, Level.SHOULD, Scope.CARD, Scope.A2A_1_0, Scope.A2A_0_3

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
    _c(
        "ap2.v02-no-required",
        _M,
        _V03,
        "20.7",
        "A tenant a 0.3 card's v0.2 declaration lists in params.ap2 waits for payment without "
        "x402.payment.required: its terms are in the cart.",
    ),
    _c(
        "ap2.v02-cart-offered",
        _M,
        _V03,
        "20.7",
        "The task's ap2-checkout artifact is an AP2 v0.1 CartMandate whose x402 method data are the "
        "terms, contents.id the offerId, the total kept by the price rule, and whose merchant_authorization "
        "verifies with a jwksUrl key and hashes its contents.",
    ),
    _c(
        "ap2.v02-paid-with-mandate",
        _M,
        _V03,
        "20.7",
        "A PaymentMandate carrying the x402 payment, with a valid user_authorization, completes the task, "
        "settled on chain, its receipts in x402.payment.receipts.",
    ),
    _c(
        "ap2.v02-binding-payment",
        _M,
        _V03,
        "20.7",
        "A PaymentMandate whose details carry another payment than the one user_authorization signs is "
        "refused with InvalidParamsError and invalid_mandate; nothing moves.",
    ),
    _c(
        "ap2.v02-standalone-refused",
        _M,
        _V03,
        "20.7",
        "A round offered with a cart, paid in x402.payment.payload without a PaymentMandate, is refused with "
        "InvalidParamsError and invalid_mandate; nothing moves.",
    ),
)
"""The ``ap2.*`` rows, in the order the kit reports them."""
