"""A round's checkout JWT (§20.3): the example's claims from the example's terms, a signature the published
keys verify, a checkout the AP2 SDK takes as the one the mandates name, and terms that get none."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from joserfc import jwt
from joserfc.errors import BadSignatureError

from a2a_x402.extension import Ap2ErrorCode, ap2_digest
from a2a_x402.facilitator.wire import PaymentRequired
from a2a_x402.merchant.ap2 import (
    CheckoutKeys,
    CheckoutNotOffered,
    CheckoutTokenError,
    IssuerKeys,
    MandateKind,
    MandateRefused,
    MandateUsage,
    NotOfferedReason,
    ParAsset,
    SignedCheckout,
    ap2_sdk_available,
    check_checkout_mandate,
    check_payment_mandate,
    checkout_claims,
    load_checkout_keys,
    sign_checkout,
    verify_mandate,
)
from tests.merchant.ap2.support import (
    ITEM,
    LINKS,
    MERCHANT,
    OFFER_ID,
    USDC,
    claims_of,
    example_round,
    example_terms,
    header_of,
    published,
    shape,
    write_key,
)


@pytest.fixture
def keys(tmp_path: Path) -> CheckoutKeys:
    write_key(tmp_path / "checkout.pem")
    return load_checkout_keys([tmp_path / "checkout.pem"])


def _sign(keys: CheckoutKeys, terms: PaymentRequired | None = None, **changes: Any) -> SignedCheckout:
    arguments: dict[str, Any] = {
        "merchant": MERCHANT,
        "item": ITEM,
        "assets": [USDC],
        "currency": "USD",
        "now": example_round()[1]["iat"],
        "links": LINKS,
    } | changes
    return sign_checkout(terms if terms is not None else example_terms(), keys, **arguments)


def _terms(*entries: dict[str, Any]) -> PaymentRequired:
    """The example's terms with its one entry changed by each of ``entries`` (one entry per change)."""
    required = example_round()[0]
    [entry] = required["accepts"]
    return PaymentRequired.from_wire(required | {"accepts": [entry | change for change in entries]})


def test_the_examples_terms_give_the_examples_checkout_but_for_its_expiry(keys: CheckoutKeys) -> None:
    required, expected, example_jwt = example_round()
    signed = _sign(keys)
    assert shape(dict(signed.claims)) == shape(expected)
    assert list(signed.claims) == list(expected)  # the members in the example's order, too
    # The example's checkout lives 900 s; ours as long as the offer: the terms' maxTimeoutSeconds.
    assert dict(signed.claims) | {"exp": expected["exp"]} == expected
    assert signed.expires_at == signed.claims["iat"] + required["accepts"][0]["maxTimeoutSeconds"]
    assert signed.claims["x402"] == required
    assert signed.claims["id"] == OFFER_ID
    assert signed.total == 25
    assert header_of(signed.jwt) == {"alg": "ES256", "typ": "JWT", "kid": keys.signing_kid}
    assert header_of(signed.jwt).keys() == header_of(example_jwt).keys()
    assert claims_of(signed.jwt) == dict(signed.claims)
    assert signed.checkout_hash == ap2_digest(signed.jwt)


def test_the_checkout_verifies_with_the_published_jwks(keys: CheckoutKeys) -> None:
    signed = _sign(keys)
    served = published(keys)
    token = jwt.decode(signed.jwt, served, algorithms=["ES256"])
    assert token.claims == dict(signed.claims)
    assert token.header["kid"] == keys.signing_kid
    assert keys.verify(signed.jwt) == dict(signed.claims)


def test_a_tampered_checkout_does_not_verify(keys: CheckoutKeys) -> None:
    signed = _sign(keys)
    header, payload, signature = signed.jwt.split(".")
    cheaper = dict(signed.claims) | {"totals": [{"type": "total", "amount": 1}]}
    forged_payload = base64.urlsafe_b64encode(json.dumps(cheaper).encode()).rstrip(b"=").decode()
    for forged in (f"{header}.{forged_payload}.{signature}", f"{header}.{payload}.{signature[::-1]}"):
        with pytest.raises(CheckoutTokenError) as caught:
            keys.verify(forged)
        assert "\n" not in str(caught.value)
        assert forged not in str(caught.value)
        served = published(keys)
        with pytest.raises(BadSignatureError):
            jwt.decode(forged, served, algorithms=["ES256"])


def test_an_offer_signed_by_the_retired_key_still_verifies_after_rotation(tmp_path: Path) -> None:
    write_key(tmp_path / "old.pem")
    write_key(tmp_path / "new.pem")
    before = load_checkout_keys([tmp_path / "old.pem"])
    after = load_checkout_keys([tmp_path / "new.pem", tmp_path / "old.pem"])
    old_offer, new_offer = _sign(before), _sign(after)
    assert header_of(new_offer.jwt)["kid"] == after.signing_kid != before.signing_kid
    served = published(after)
    for signed in (old_offer, new_offer):
        assert jwt.decode(signed.jwt, served, algorithms=["ES256"]).claims == dict(signed.claims)


def test_es256_signs_the_same_checkout_differently_each_time(keys: CheckoutKeys) -> None:
    first, second = _sign(keys), _sign(keys)
    assert first.claims == second.claims
    assert first.jwt != second.jwt  # AP2 asks for non-deterministic signatures: ECDSA's are


def test_a_sub_cent_price_gets_no_checkout(keys: CheckoutKeys) -> None:
    with pytest.raises(CheckoutNotOffered) as caught:
        _sign(keys, _terms({"amount": "250001"}))
    assert caught.value.reason is NotOfferedReason.NOT_WHOLE_MINOR_UNITS
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("terms", "changes", "reason"),
    [
        (
            lambda: _terms({"asset": "0x1111111111111111111111111111111111111111"}),
            {},
            NotOfferedReason.NOT_AT_PAR,
        ),
        (lambda: _terms({"network": "eip155:8453"}), {}, NotOfferedReason.NOT_AT_PAR),
        (example_terms, {"currency": "XAU"}, NotOfferedReason.UNKNOWN_CURRENCY),
        (lambda: _terms({}, {"amount": "500000"}), {}, NotOfferedReason.PRICES_DIFFER),
    ],
    ids=["another-token", "another-network", "unknown-currency", "two-prices"],
)
def test_terms_the_price_rule_cannot_carry_get_no_checkout(
    keys: CheckoutKeys, terms: Any, changes: dict[str, Any], reason: NotOfferedReason
) -> None:
    with pytest.raises(CheckoutNotOffered) as caught:
        _sign(keys, terms(), **changes)
    assert caught.value.reason is reason


def test_entries_in_two_par_tokens_of_one_price_share_one_checkout(keys: CheckoutKeys) -> None:
    dai = ParAsset(network="eip155:84532", address="0x" + "22" * 20, decimals=18)
    terms = _terms({}, {"asset": dai.address, "amount": str(25 * 10**16)})
    signed = _sign(keys, terms, assets=[USDC, dai])
    assert signed.total == 25
    assert len(signed.claims["x402"]["accepts"]) == 2


def test_an_upto_offer_is_checked_out_at_its_maximum() -> None:
    required = example_round()[0]
    [entry] = required["accepts"]
    upto = entry | {
        "scheme": "upto",
        "amount": "1000000",
        "extra": {"facilitatorAddress": "0x" + "33" * 20, "offerId": OFFER_ID},
    }
    terms = PaymentRequired.from_wire(required | {"accepts": [upto]})
    claims = checkout_claims(terms, merchant=MERCHANT, item=ITEM, assets=[USDC], currency="USD", now=1)
    assert [total["amount"] for total in claims["totals"]] == [100, 100]
    assert claims["links"] == []


@pytest.mark.parametrize(
    ("extras", "words"),
    [
        ([{"name": "USDC", "version": "2"}], "needs extra.offerId"),
        ([{"offerId": "a"}, {"offerId": "b"}], "different offerIds"),
    ],
    ids=["no-offer-id", "two-offer-ids"],
)
def test_terms_without_one_offer_id_are_not_the_embedded_flows(
    extras: list[dict[str, Any]], words: str
) -> None:
    terms = _terms(*({"extra": extra} for extra in extras))
    with pytest.raises(ValueError, match=words):
        checkout_claims(terms, merchant=MERCHANT, item=ITEM, assets=[USDC], currency="USD", now=1)


def test_the_checkout_falls_back_to_the_merchant_id_as_issuer() -> None:
    bare = type(MERCHANT)(id="merchant.example", name="Text statistics merchant")
    claims = checkout_claims(example_terms(), merchant=bare, item=ITEM, assets=[USDC], currency="USD", now=1)
    assert claims["iss"] == "merchant.example"
    assert claims["merchant"] == {"id": "merchant.example", "name": "Text statistics merchant"}


# -- the AP2 SDK takes it as the checkout the mandates name ---------------------------------------------


def _mandates(checkout: SignedCheckout, *, item_id: str = ITEM.id) -> tuple[str, str, IssuerKeys, int]:
    """A user's open checkout and payment mandates issued with the SDK (a fresh issuer and agent key), and
    the closed mandates an agent presents over them for ``checkout``; the time they were made at."""
    pytest.importorskip("ap2.sdk.mandate", reason="the AP2 SDK is not installed (scripts/setup installs it)")
    from ap2.sdk.generated.checkout_mandate import CheckoutMandate
    from ap2.sdk.generated.open_checkout_mandate import OpenCheckoutMandate
    from ap2.sdk.generated.open_payment_mandate import OpenPaymentMandate
    from ap2.sdk.generated.payment_mandate import PaymentMandate
    from ap2.sdk.mandate import MandateClient
    from jwcrypto.jwk import JWK

    # Through the wrapper first, which turns the SDK's file log off before the SDK issues anything.
    assert ap2_sdk_available()
    wall = int(time.time())  # the key-binding JWT's iat is the SDK's wall clock
    issuer = JWK.generate(kty="EC", crv="P-256", kid="trusted-surface-test")
    agent = JWK.generate(kty="EC", crv="P-256")
    cnf = {"jwk": json.loads(agent.export_public())}
    merchant = MERCHANT.to_wire()
    client = MandateClient()
    open_checkout = client.create(
        [
            OpenCheckoutMandate.model_validate(
                {
                    "constraints": [
                        {"type": "checkout.allowed_merchants", "allowed": [merchant]},
                        {
                            "type": "checkout.line_items",
                            "items": [
                                {
                                    "id": "one-request",
                                    "acceptable_items": [{"id": item_id, "title": "Text statistics"}],
                                    "quantity": 1,
                                }
                            ],
                        },
                    ],
                    "cnf": cnf,
                    "iat": wall,
                    "exp": wall + 600,
                }
            )
        ],
        issuer,
    )
    open_payment = client.create(
        [
            OpenPaymentMandate.model_validate(
                {
                    "constraints": [
                        {"type": "payment.amount_range", "currency": "USD", "max": 100, "min": 0},
                        {"type": "payment.allowed_payees", "allowed": [merchant]},
                        {
                            "type": "payment.reference",
                            "conditional_transaction_id": ap2_digest(open_checkout),
                        },
                    ],
                    "cnf": cnf,
                    "iat": wall,
                    "exp": wall + 600,
                }
            )
        ],
        issuer,
    )
    closed_checkout = CheckoutMandate(
        checkout_jwt=checkout.jwt, checkout_hash=checkout.checkout_hash, iat=wall
    )
    closed_payment = PaymentMandate.model_validate(
        {
            "transaction_id": checkout.checkout_hash,
            "payee": merchant,
            "payment_amount": {"amount": checkout.total, "currency": "USD"},
            "payment_instrument": {"type": "x402", "id": "eip155:84532:0x" + "12" * 20},
            "iat": wall,
        }
    )
    round_ = {"nonce": checkout.claims["id"], "aud": MERCHANT.id}
    checkout_token = client.present(agent, open_checkout, [closed_checkout], **round_)
    payment_token = client.present(agent, open_payment, [closed_payment], **round_)
    trusted = IssuerKeys.from_jwks({"keys": [json.loads(issuer.export_public())]})
    return checkout_token, payment_token, trusted, wall


def test_the_sdk_takes_our_checkout_as_the_one_the_mandates_name(keys: CheckoutKeys) -> None:
    signed = _sign(keys, now=int(time.time()))
    checkout_token, payment_token, trusted, wall = _mandates(signed)
    round_: dict[str, Any] = {"audience": MERCHANT.id, "nonce": OFFER_ID, "now": wall}
    checkout = verify_mandate(MandateKind.CHECKOUT, checkout_token, trusted, **round_)
    payment = verify_mandate(MandateKind.PAYMENT, payment_token, trusted, **round_)
    check_checkout_mandate(checkout, checkout_jwt=signed.jwt)
    assert checkout.closed_claims["checkout_hash"] == signed.checkout_hash
    check_payment_mandate(
        payment,
        transaction_id=signed.checkout_hash,
        open_checkout_hash=checkout.open_hash,
        usage=MandateUsage(),
    )


def test_the_sdk_reads_our_line_items_against_the_open_mandate(keys: CheckoutKeys) -> None:
    signed = _sign(keys, now=int(time.time()))
    checkout_token, _, trusted, wall = _mandates(signed, item_id="another-skill")
    checkout = verify_mandate(
        MandateKind.CHECKOUT, checkout_token, trusted, audience=MERCHANT.id, nonce=OFFER_ID, now=wall
    )
    with pytest.raises(MandateRefused) as caught:
        check_checkout_mandate(checkout, checkout_jwt=signed.jwt)
    assert caught.value.code is Ap2ErrorCode.INVALID_MANDATE
    # And a checkout of another round is not the one the closed mandate names.
    other = _sign(keys, now=int(time.time()))
    checkout_token, _, trusted, wall = _mandates(signed)
    checkout = verify_mandate(
        MandateKind.CHECKOUT, checkout_token, trusted, audience=MERCHANT.id, nonce=OFFER_ID, now=wall
    )
    with pytest.raises(MandateRefused, match="checkout_hash mismatch"):
        check_checkout_mandate(checkout, checkout_jwt=other.jwt)
