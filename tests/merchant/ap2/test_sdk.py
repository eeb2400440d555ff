"""The AP2 SDK through our one wrapper, on the specification's own mandates (§20.4).

The examples were made with the SDK at 2026-05-04 10:05 UTC (`_NOW`); the merchant's record, the issuer
keys and the round (audience, nonce) are those of the examples unless a test changes one of them.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import time
from typing import Any

import pytest

from a2a_x402.extension import Ap2ErrorCode, parse_ap2_checkout_data, parse_ap2_mandates
from a2a_x402.merchant.ap2 import (
    IssuerKeys,
    MandateKind,
    MandateRefused,
    MandateUsage,
    VerifiedMandate,
    check_checkout_mandate,
    check_payment_mandate,
    verify_mandate,
)
from tests.fixtures.ap2 import issue_open_mandate_claims, new_key, public_jwks
from tests.spec.support import example

mandate_module = pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

_NOW = 1777889100
_AUDIENCE = "merchant.example"
_NONCE = "5d1e8a3c7b9f42e0a6c4d2b8f0e1a3c5"


def _mandates() -> tuple[str, str]:
    message = example("ap2.payment-submitted.request.json")["params"]["message"]
    [data] = [part["data"] for part in message["parts"] if "data" in part]
    mandates = parse_ap2_mandates(data)
    return mandates.checkout_mandate, mandates.payment_mandate


def _checkout_jwt() -> str:
    [artifact] = example("ap2.payment-required.response.json")["result"]["task"]["artifacts"]
    return parse_ap2_checkout_data(artifact["parts"][0]["data"])


def _issuers() -> IssuerKeys:
    return IssuerKeys.from_jwks(example("ap2.issuer-keys.json"))


def _verify(kind: MandateKind, token: str, **changes: Any) -> VerifiedMandate:
    arguments: dict[str, Any] = {"audience": _AUDIENCE, "nonce": _NONCE, "now": _NOW} | changes
    issuers = arguments.pop("issuers", _issuers())
    return verify_mandate(kind, token, issuers, **arguments)


def _refused(code: Ap2ErrorCode, call: Any, *args: Any, **kwargs: Any) -> MandateRefused:
    with pytest.raises(MandateRefused) as caught:
        call(*args, **kwargs)
    assert caught.value.code is code, caught.value
    assert "\n" not in str(caught.value)
    return caught.value


def test_the_examples_mandates_are_accepted_and_name_what_the_receipts_reference() -> None:
    checkout_token, payment_token = _mandates()
    checkout = _verify(MandateKind.CHECKOUT, checkout_token)
    payment = _verify(MandateKind.PAYMENT, payment_token)
    check_checkout_mandate(checkout, checkout_jwt=_checkout_jwt())
    check_payment_mandate(
        payment,
        transaction_id=checkout.closed_claims["checkout_hash"],
        open_checkout_hash=checkout.open_hash,
        usage=MandateUsage(),
    )
    # The payload_hash the SDK's typed model drops is kept in the claims, for the binding check.
    assert (
        payment.closed_claims["payment_instrument"]["payload_hash"]
        == "EcVgaApdeaFJYKZUCHALIu8srF6fuuS4Vtk9YL67Eko"
    )
    [info] = example("ap2.mandate-refused.error.json")["error"]["data"]
    references = [info["metadata"][key] for key in ("ap2CheckoutReceipt", "ap2PaymentReceipt")]
    assert [checkout.closed_reference, payment.closed_reference] == [
        _claims(receipt)["reference"] for receipt in references
    ]
    # The open payment mandate's payment.reference names the open checkout mandate as presented.
    [reference] = [c for c in payment.open_claims["constraints"] if c["type"] == "payment.reference"]
    assert reference["conditional_transaction_id"] == checkout.open_hash
    assert checkout.open_key != checkout.open_hash


def _claims(token: str) -> Any:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"audience": "other.example"}, "aud mismatch"),
        ({"nonce": "another-round"}, "nonce mismatch"),
        ({"now": _NOW + 30 * 86400}, "expired"),
        (
            {"issuers": IssuerKeys.from_jwks({"keys": [{**example("ap2.checkout-keys.json")["keys"][0]}]})},
            "not trusted",
        ),
    ],
    ids=["wrong-aud", "wrong-nonce", "expired", "untrusted-issuer"],
)
def test_a_mandate_that_does_not_verify_is_an_invalid_credential(changes: dict[str, Any], words: str) -> None:
    _, payment_token = _mandates()
    error = _refused(Ap2ErrorCode.INVALID_CREDENTIAL, _verify, MandateKind.PAYMENT, payment_token, **changes)
    assert words in error.detail


def test_an_issuer_key_of_the_trusted_kid_but_another_key_does_not_verify() -> None:
    checkout_key = example("ap2.checkout-keys.json")["keys"][0]
    impostor = IssuerKeys.from_jwks({"keys": [{**checkout_key, "kid": "trusted-surface-1"}]})
    checkout_token, _ = _mandates()
    _refused(Ap2ErrorCode.INVALID_CREDENTIAL, _verify, MandateKind.CHECKOUT, checkout_token, issuers=impostor)


def _tampered(token: str) -> str:
    """`token` with one character of the open mandate's issuer signature changed."""
    jwt, rest = token.split("~", 1)
    header, payload, signature = jwt.split(".")
    middle = len(signature) // 2
    changed = signature[:middle] + ("A" if signature[middle] != "A" else "B") + signature[middle + 1 :]
    return f"{header}.{payload}.{changed}~{rest}"


def test_a_tampered_mandate_is_an_invalid_credential_and_is_not_repeated() -> None:
    _, payment_token = _mandates()
    tampered = _tampered(payment_token)
    error = _refused(Ap2ErrorCode.INVALID_CREDENTIAL, _verify, MandateKind.PAYMENT, tampered)
    for piece in tampered.replace("~", ".").split("."):
        if len(piece) >= 40:
            assert piece not in str(error)


def test_a_mandate_with_text_no_sd_jwt_has_does_not_verify() -> None:
    checkout_token, _ = _mandates()
    _refused(Ap2ErrorCode.INVALID_CREDENTIAL, _verify, MandateKind.CHECKOUT, checkout_token + "é")


def test_a_closed_hop_moved_onto_another_open_mandate_does_not_verify() -> None:
    checkout_token, payment_token = _mandates()
    spliced = checkout_token.split("~~")[0] + "~~" + payment_token.split("~~")[1]
    _refused(Ap2ErrorCode.INVALID_CREDENTIAL, _verify, MandateKind.PAYMENT, spliced)


def test_a_spent_budget_is_an_invalid_mandate() -> None:
    checkout_token, payment_token = _mandates()
    checkout = _verify(MandateKind.CHECKOUT, checkout_token)
    payment = _verify(MandateKind.PAYMENT, payment_token)
    error = _refused(
        Ap2ErrorCode.INVALID_MANDATE,
        check_payment_mandate,
        payment,
        transaction_id=checkout.closed_claims["checkout_hash"],
        open_checkout_hash=checkout.open_hash,
        usage=MandateUsage(total=1990, uses=12, last_used=_NOW - 3600),
    )
    assert "budget" in error.detail


def test_a_payment_mandate_for_another_checkout_is_an_invalid_mandate() -> None:
    checkout_token, payment_token = _mandates()
    checkout = _verify(MandateKind.CHECKOUT, checkout_token)
    payment = _verify(MandateKind.PAYMENT, payment_token)
    for transaction_id, open_checkout_hash in (
        ("x" * 43, checkout.open_hash),
        (checkout.closed_claims["checkout_hash"], "y" * 43),
    ):
        _refused(
            Ap2ErrorCode.INVALID_MANDATE,
            check_payment_mandate,
            payment,
            transaction_id=transaction_id,
            open_checkout_hash=open_checkout_hash,
            usage=MandateUsage(),
        )


def test_a_checkout_mandate_for_another_checkout_is_an_invalid_mandate() -> None:
    checkout_token, _ = _mandates()
    checkout = _verify(MandateKind.CHECKOUT, checkout_token)
    [info] = example("ap2.mandate-refused.error.json")["error"]["data"]
    another = info["metadata"]["ap2CheckoutReceipt"]  # a JWS of the same key, but no checkout
    _refused(Ap2ErrorCode.INVALID_MANDATE, check_checkout_mandate, checkout, checkout_jwt=another)


def test_a_mandate_of_the_other_kind_is_not_supported() -> None:
    checkout_token, payment_token = _mandates()
    error = _refused(Ap2ErrorCode.MANDATES_NOT_SUPPORTED, _verify, MandateKind.CHECKOUT, payment_token)
    assert "vct" in error.detail
    _refused(Ap2ErrorCode.MANDATES_NOT_SUPPORTED, _verify, MandateKind.PAYMENT, checkout_token)


def test_a_mandate_without_its_closed_hop_is_not_supported() -> None:
    checkout_token, _ = _mandates()
    _refused(
        Ap2ErrorCode.MANDATES_NOT_SUPPORTED, _verify, MandateKind.CHECKOUT, checkout_token.split("~~")[0]
    )


def test_a_checked_mandate_must_be_of_the_kind_checked() -> None:
    checkout_token, _ = _mandates()
    checkout = _verify(MandateKind.CHECKOUT, checkout_token)
    with pytest.raises(ValueError, match="expected a payment mandate"):
        check_payment_mandate(checkout, transaction_id="t", open_checkout_hash="h", usage=MandateUsage())


@pytest.mark.parametrize(
    ("jwks", "words"),
    [
        ({"keys": []}, "non-empty"),
        ({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": "AA"}]}, "EC P-256"),
        ({"keys": [{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}]}, "kid"),
        ({"keys": [{"kty": "EC", "crv": "P-256", "kid": "k", "x": "AA", "y": "AA", "d": "AA"}]}, "private"),
    ],
    ids=["empty", "not-p256", "no-kid", "private"],
)
def test_issuer_keys_refuse_what_is_not_a_public_p256_key(jwks: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        IssuerKeys.from_jwks(jwks)


def test_the_sdk_writes_no_log_file_into_its_install() -> None:
    checkout_token, payment_token = _mandates()
    checkout = _verify(MandateKind.CHECKOUT, checkout_token)
    check_checkout_mandate(checkout, checkout_jwt=_checkout_jwt())
    _refused(Ap2ErrorCode.INVALID_CREDENTIAL, _verify, MandateKind.PAYMENT, payment_token, nonce="n")
    assert mandate_module.LOG_FILE_PATH == os.devnull
    # Where the SDK would otherwise write: `.logs` three levels above its `ap2/sdk/mandate.py`.
    install = pathlib.Path(mandate_module.__file__).resolve().parents[3]
    assert not (install / ".logs").exists()


def test_a_constraint_of_an_unknown_type_is_unresolved() -> None:
    """An open mandate the SDK issues for us (our own issuer and agent keys) with a constraint it has no
    evaluator for; the closed hop is the example's closed payment mandate, presented over it."""
    from ap2.sdk.generated.payment_mandate import PaymentMandate

    # The key-binding JWT's iat is the SDK's wall clock, so the chain lives and is checked at that time.
    wall = int(time.time())
    issuer = new_key("test-issuer")
    agent = new_key()
    # Through the wrapper first, which turns the SDK's file log off before the SDK issues anything.
    _, payment_token = _mandates()
    closed = PaymentMandate.model_validate(dict(_verify(MandateKind.PAYMENT, payment_token).closed_claims))
    root = issue_open_mandate_claims(
        issuer,
        agent,
        "mandate.payment.open.1",
        [{"type": "payment.weather", "sunny": True}],
        now=wall,
        lifetime_s=600,
    )
    client = mandate_module.MandateClient()
    token = client.present(agent, root, [closed], nonce=_NONCE, aud=_AUDIENCE)
    issuers = IssuerKeys.from_jwks(public_jwks(issuer))
    error = _refused(
        Ap2ErrorCode.UNRESOLVED_CONSTRAINT,
        _verify,
        MandateKind.PAYMENT,
        token,
        issuers=issuers,
        now=wall,
    )
    assert "payment.weather" in error.detail


def test_a_constraint_the_sdk_cannot_evaluate_is_unresolved_whatever_it_raises() -> None:
    """A budget whose `max` the SDK multiplies into infinity (`int(inf)` is an OverflowError, not a
    ValueError): the client's data, so a refusal, never an error of the merchant."""
    from ap2.sdk.generated.payment_mandate import PaymentMandate

    wall = int(time.time())
    issuer = new_key("test-issuer")
    agent = new_key()
    checkout_token, payment_token = _mandates()
    checkout = _verify(MandateKind.CHECKOUT, checkout_token)
    closed = PaymentMandate.model_validate(dict(_verify(MandateKind.PAYMENT, payment_token).closed_claims))
    root = issue_open_mandate_claims(
        issuer,
        agent,
        "mandate.payment.open.1",
        [{"type": "payment.budget", "max": 1e308, "currency": "USD"}],
        now=wall,
        lifetime_s=600,
    )
    token = mandate_module.MandateClient().present(agent, root, [closed], nonce=_NONCE, aud=_AUDIENCE)
    payment = _verify(MandateKind.PAYMENT, token, issuers=IssuerKeys.from_jwks(public_jwks(issuer)), now=wall)
    error = _refused(
        Ap2ErrorCode.UNRESOLVED_CONSTRAINT,
        check_payment_mandate,
        payment,
        transaction_id=checkout.closed_claims["checkout_hash"],
        open_checkout_hash=checkout.open_hash,
        usage=MandateUsage(),
    )
    assert "OverflowError" in error.detail
