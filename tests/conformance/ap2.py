"""Merchants of the embedded flow (§20) for the kit's `ap2.*` checks, and the issuer the kit is given.

* `ap2_tenants`: a tenants file whose default tenant is outside the embedded flow, `acme` offers it (taking
  mandates from `ISSUER`'s surface) and `strict` requires it; each with a checkout key of its own.
Deliberately broken merchants, each caught by the checks that test its fault:

* `ignores_payload_hash`: patches the merchant's verifier so that a payment mandate's `payload_hash`
  matches any payment (`ap2.binding-payload`).
* `ignores_signed_payment`: patches the merchant's v0.2 verifier (§20.7) so that the hash of the
  `payment_mandate_contents` a `user_authorization` signs matches any contents (`ap2.v02-binding-payment`).
* `checkout_carries_work`: answers on the A2A 1.0 HTTP bindings whose `ap2-checkout` artifact also carries a
  text part: work delivered under the checkout's id (`ap2.checkout-offered`, and the kit's delivery checks).
* `publishes_private_keys`: JWK Sets of the checkout keys with a private member `d` (`ap2.declaration`).
* `cart_total_changed`, `terms_beside_the_cart`: A2A 0.3 answers whose v0.2 cart asks twice the total its
  `merchant_authorization` signed (`ap2.v02-cart-offered`), or whose status carries `x402.payment.required`
  beside the cart (`ap2.v02-no-required`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Scope

from a2a_x402.merchant.ap2 import _v01, _verify
from a2a_x402.merchant.ap2._user_authorization import verify_user_authorization
from tests.fixtures.ap2 import MERCHANT, public_jwks
from tests.fixtures.conformance import ACME_PAY_TO, ACME_PRICE
from tests.fixtures.merchant import DEFAULT_PAY_TO, DEFAULT_PRICE
from tests.merchant.ap2.support import write_key

from .broken import is_1_0, rewrite_json

__all__ = [
    "STRICT_ID",
    "STRICT_PAY_TO",
    "ap2_tenants",
    "checkout_carries_work",
    "ignores_payload_hash",
    "publishes_private_keys",
]

STRICT_PAY_TO = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"
STRICT_ID = "strict.example"


def ap2_tenants(folder: Path, issuer: Any) -> Path:
    """The tenants file of the module docstring, trusting `issuer`'s public key for `acme` and `strict`."""
    (folder / "surface.jwks.json").write_text(json.dumps(public_jwks(issuer)))
    write_key(folder / "acme.pem")
    write_key(folder / "strict.pem")
    path = folder / "ap2-tenants.toml"  # serve_reference_merchant writes its own tenants.toml
    path.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = {DEFAULT_PRICE}\n\n'
        f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = {ACME_PRICE}\n\n'
        f'[tenants.acme.ap2]\nmerchant = {{ id = "{MERCHANT.id}", name = "{MERCHANT.name}", '
        f'website = "{MERCHANT.website}" }}\n'
        'checkout_keys = ["acme.pem"]\nissuers = ["surface.jwks.json"]\n\n'
        f'[tenants.strict]\npay_to = "{STRICT_PAY_TO}"\nprice = {ACME_PRICE}\n\n'
        f'[tenants.strict.ap2]\nmerchant = {{ id = "{STRICT_ID}", name = "Strict" }}\n'
        'checkout_keys = ["strict.pem"]\nissuers = ["surface.jwks.json"]\nrequired = true\n'
    )
    return path


class _MatchesAnything(str):
    """A hash that compares equal to any other: the verifier's `payload_hash` comparison always holds."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


def ignores_payload_hash(patch: pytest.MonkeyPatch) -> None:
    """Make the merchant's verifier take any `payload_hash` (while `patch` lasts)."""
    patch.setattr(_verify, "payload_hash", lambda payload: _MatchesAnything("any"))


def ignores_signed_payment(patch: pytest.MonkeyPatch) -> None:
    """Make the merchant's v0.2 verifier take a `user_authorization` as signing any payment_mandate_contents
    (while `patch` lasts); everything else of it is still checked."""

    def lenient(*args: Any, **kwargs: Any) -> tuple[str, ...]:
        cart, _ = verify_user_authorization(*args, **kwargs)
        return cart, _MatchesAnything("any")

    patch.setattr(_v01, "verify_user_authorization", lenient)


def _with_work(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("artifactId") == "ap2-checkout" and isinstance(value.get("parts"), list):
            value["parts"].append({"text": "the paid work, early"})
        for item in value.values():
            _with_work(item)
    elif isinstance(value, list):
        for item in value:
            _with_work(item)
    return value


def checkout_carries_work(app: ASGIApp) -> ASGIApp:
    """A2A 1.0 HTTP answers whose checkout artifact carries a text part beside its checkout."""
    return rewrite_json(app, _with_work)


def _jwks(scope: Scope) -> bool:
    return str(scope.get("path", "")).startswith("/.well-known/ap2/")


def _with_private(value: Any) -> Any:
    for key in value.get("keys", []) if isinstance(value, dict) else []:
        key["d"] = "WW91IHNob3VsZCBub3Qgc2VlIHRoaXM"
    return value


def publishes_private_keys(app: ASGIApp) -> ASGIApp:
    """JWK Sets of the checkout keys whose keys carry a private member."""
    return rewrite_json(app, _with_private, _jwks)


def _not_1_0(scope: Scope) -> bool:
    return not is_1_0(scope)


def _walk(value: Any, change: Callable[[dict[str, Any]], None]) -> Any:
    if isinstance(value, dict):
        change(value)
        for item in value.values():
            _walk(item, change)
    elif isinstance(value, list):
        for item in value:
            _walk(item, change)
    return value


def _twice_the_total(holder: dict[str, Any]) -> None:
    cart = holder.get("ap2.mandates.CartMandate")
    if isinstance(cart, dict):
        cart["contents"]["payment_request"]["details"]["total"]["amount"]["value"] *= 2


def cart_total_changed(app: ASGIApp) -> ASGIApp:
    """A2A 0.3 answers whose cart's total is twice the one its `merchant_authorization` signed."""
    return rewrite_json(app, lambda value: _walk(value, _twice_the_total), _not_1_0)


def _terms_beside(holder: dict[str, Any]) -> None:
    if holder.get("x402.payment.status") == "payment-required":
        holder.setdefault("x402.payment.required", {"x402Version": 1, "accepts": [], "error": ""})


def terms_beside_the_cart(app: ASGIApp) -> ASGIApp:
    """A2A 0.3 answers whose payment-required status carries `x402.payment.required` beside the cart."""
    return rewrite_json(app, lambda value: _walk(value, _terms_beside), _not_1_0)
