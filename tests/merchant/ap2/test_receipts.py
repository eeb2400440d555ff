"""The AP2 receipts of a round (§20.6): the examples' claims from the examples' round, signatures the
published keys verify, and receipts the AP2 SDK's models and verifier take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from joserfc import jwt

from a2a_x402.extension import Ap2ErrorCode, Ap2Receipts, PaymentErrorCode, parse_ap2_mandates
from a2a_x402.merchant.ap2 import (
    CheckoutKeys,
    ReceiptSubject,
    ap2_sdk_available,
    error_receipts,
    load_checkout_keys,
    mandate_reference,
    success_receipts,
)
from tests.merchant.ap2.support import MERCHANT, OFFER_ID, TASK_ID, claims_of, header_of, published, write_key
from tests.spec.support import example

_TRANSACTION = "0x5c3b1e2d4f6a8b0c9d7e5f3a1b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c"


@pytest.fixture
def keys(tmp_path: Path) -> CheckoutKeys:
    write_key(tmp_path / "checkout.pem")
    return load_checkout_keys([tmp_path / "checkout.pem"])


def _subject() -> ReceiptSubject:
    """The examples' round, its references read from the mandates the client sent."""
    message = example("ap2.payment-submitted.request.json")["params"]["message"]
    [data] = [part["data"] for part in message["parts"] if "data" in part]
    mandates = parse_ap2_mandates(data)
    return ReceiptSubject(
        checkout_reference=mandate_reference(mandates.checkout_mandate),
        payment_reference=mandate_reference(mandates.payment_mandate),
        order_id=TASK_ID,
        payment_id=OFFER_ID,
    )


def _example_receipts(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The claims of the checkout and payment receipts of the example ``name``."""
    if name == "ap2.payment-completed.response.json":
        [_, part] = example(name)["result"]["task"]["status"]["message"]["parts"]
        tokens = part["data"]["ap2.checkout_receipt"], part["data"]["ap2.payment_receipt"]
    else:
        [info] = example(name)["error"]["data"]
        tokens = info["metadata"]["ap2CheckoutReceipt"], info["metadata"]["ap2PaymentReceipt"]
    checkout, payment = (claims_of(token) for token in tokens)
    return checkout, payment


def _claims(receipts: Ap2Receipts) -> tuple[dict[str, Any], dict[str, Any]]:
    return claims_of(receipts.checkout_receipt), claims_of(receipts.payment_receipt)


def test_the_examples_round_gives_the_examples_success_receipts(keys: CheckoutKeys) -> None:
    expected = _example_receipts("ap2.payment-completed.response.json")
    receipts = success_receipts(
        keys,
        _subject(),
        merchant=MERCHANT,
        transaction=_TRANSACTION,
        network="eip155:84532",
        now=expected[0]["iat"],
    )
    assert _claims(receipts) == expected
    assert [list(claims) for claims in _claims(receipts)] == [list(claims) for claims in expected]
    for token in (receipts.checkout_receipt, receipts.payment_receipt):
        assert header_of(token) == {"alg": "ES256", "typ": "JWT", "kid": keys.signing_kid}
    # The wire form of the receipts part (§20.6).
    assert set(receipts.to_wire()) == {"ap2.checkout_receipt", "ap2.payment_receipt"}


def test_the_examples_refusal_gives_the_examples_error_receipts(keys: CheckoutKeys) -> None:
    expected = _example_receipts("ap2.mandate-refused.error.json")
    receipts = error_receipts(
        keys,
        _subject(),
        merchant=MERCHANT,
        error=Ap2ErrorCode.INVALID_MANDATE,
        description="the payment mandate's budget is exhausted",
        now=expected[0]["iat"],
    )
    assert _claims(receipts) == expected
    assert [list(claims) for claims in _claims(receipts)] == [list(claims) for claims in expected]


def test_a_failed_payment_gives_error_receipts_with_the_extension_objects_error(keys: CheckoutKeys) -> None:
    receipts = error_receipts(
        keys,
        _subject(),
        merchant=MERCHANT,
        error=PaymentErrorCode.SETTLEMENT_FAILED,
        description="the settlement transaction reverted",
        now=1777889200,
    )
    checkout, payment = _claims(receipts)
    assert checkout["error"] == payment["error"] == "SETTLEMENT_FAILED"
    assert checkout["status"] == payment["status"] == "Error"
    assert payment["payment_id"] == OFFER_ID
    assert "order_id" not in checkout


def test_the_receipts_verify_with_the_published_jwks(keys: CheckoutKeys) -> None:
    receipts = success_receipts(
        keys, _subject(), merchant=MERCHANT, transaction=_TRANSACTION, network="eip155:84532", now=1
    )
    for token in (receipts.checkout_receipt, receipts.payment_receipt):
        assert jwt.decode(token, published(keys), algorithms=["ES256"]).claims == claims_of(token)
        assert keys.verify(token) == claims_of(token)


def test_the_sdk_parses_and_verifies_our_receipts(keys: CheckoutKeys) -> None:
    pytest.importorskip("ap2.sdk.mandate", reason="the AP2 SDK is not installed (scripts/setup installs it)")
    assert ap2_sdk_available()  # the wrapper turns the SDK's file log off first
    from ap2.sdk.generated.checkout_receipt import (
        CheckoutReceipt,
        CheckoutReceiptError,
        CheckoutReceiptSuccess,
    )
    from ap2.sdk.generated.payment_receipt import PaymentReceipt, PaymentReceiptError, PaymentReceiptSuccess
    from ap2.sdk.receipt_wrapper import ReceiptClient
    from jwcrypto.jwk import JWK

    subject = _subject()
    public = JWK(**keys.public_jwks()["keys"][0])
    succeeded = success_receipts(
        keys, subject, merchant=MERCHANT, transaction=_TRANSACTION, network="eip155:84532", now=1
    )
    failed = error_receipts(
        keys, subject, merchant=MERCHANT, error=Ap2ErrorCode.INVALID_CREDENTIAL, description="expired", now=1
    )
    cases = [
        (succeeded, CheckoutReceiptSuccess, PaymentReceiptSuccess),
        (failed, CheckoutReceiptError, PaymentReceiptError),
    ]
    client = ReceiptClient()
    for receipts, checkout_type, payment_type in cases:
        checkout = CheckoutReceipt.model_validate(claims_of(receipts.checkout_receipt))
        payment = PaymentReceipt.model_validate(claims_of(receipts.payment_receipt))
        assert isinstance(checkout.root, checkout_type)
        assert isinstance(payment.root, payment_type)
        for token, reference, is_payment in (
            (receipts.checkout_receipt, subject.checkout_reference, False),
            (receipts.payment_receipt, subject.payment_reference, True),
        ):
            answer = client.verify_receipt(
                token,
                public,
                has_reference_in_store_cb=lambda seen, ref=reference: seen == ref,
                is_payment_receipt=is_payment,
            )
            assert answer == {"verified": True}
    # A receipt whose signature another key made does not verify in the SDK either.
    other = JWK.generate(kty="EC", crv="P-256")
    answer = client.verify_receipt(
        succeeded.payment_receipt, other, has_reference_in_store_cb=lambda _: True, is_payment_receipt=True
    )
    assert answer["error"] == "verification_failed"


def test_the_references_are_those_the_sdk_wrapper_reads_from_verified_mandates() -> None:
    # The SDK test of the examples asserts the same hashes for `VerifiedMandate.closed_reference`.
    [info] = example("ap2.mandate-refused.error.json")["error"]["data"]
    subject = _subject()
    assert subject.checkout_reference == claims_of(info["metadata"]["ap2CheckoutReceipt"])["reference"]
    assert subject.payment_reference == claims_of(info["metadata"]["ap2PaymentReceipt"])["reference"]


def test_an_error_description_is_one_short_line_without_token_material(keys: CheckoutKeys) -> None:
    token = "eyJhbGciOiJFUzI1NiJ9." + "A" * 80
    receipts = error_receipts(
        keys,
        _subject(),
        merchant=MERCHANT,
        error=Ap2ErrorCode.INVALID_CREDENTIAL,
        description=f"the mandate\n{token}\ndoes not verify " + "x " * 200,
        now=1,
    )
    for claims in _claims(receipts):
        assert "\n" not in claims["error_description"]
        assert "A" * 40 not in claims["error_description"]
        assert len(claims["error_description"]) <= 200
        assert claims["error_description"].startswith("the mandate … does not verify")


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (
            lambda k, s: success_receipts(
                k, s, merchant=MERCHANT, transaction="0x12", network="eip155:1", now=1
            ),
            "hash",
        ),
        (
            lambda k, s: success_receipts(
                k, s, merchant=MERCHANT, transaction=_TRANSACTION, network="base", now=1
            ),
            "CAIP-2",
        ),
        (
            lambda k, s: success_receipts(
                k, s, merchant=MERCHANT, transaction=_TRANSACTION, network="eip155:1", now=-1
            ),
            "unix",
        ),
        (
            lambda k, s: error_receipts(
                k, s, merchant=MERCHANT, error=Ap2ErrorCode.INVALID_MANDATE, description=" \n", now=1
            ),
            "says why",
        ),
        (lambda k, s: ReceiptSubject("short", s.payment_reference, TASK_ID, OFFER_ID), "43 characters"),
        (lambda k, s: ReceiptSubject(s.checkout_reference, s.payment_reference, "", OFFER_ID), "task id"),
        (lambda k, s: mandate_reference("not a mandate"), "does not end in an SD-JWT"),
    ],
    ids=["transaction", "network", "time", "description", "reference", "order", "mandate"],
)
def test_what_a_receipt_cannot_say_is_refused(keys: CheckoutKeys, call: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        call(keys, _subject())


def test_the_reference_of_a_chain_is_the_closed_mandates_even_without_a_trailing_tilde() -> None:
    subject = _subject()
    message = example("ap2.payment-submitted.request.json")["params"]["message"]
    [data] = [part["data"] for part in message["parts"] if "data" in part]
    closed_only = data["ap2.payment_mandate"].split("~~")[1]
    assert mandate_reference(closed_only) == subject.payment_reference
